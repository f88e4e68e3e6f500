"""Bytes per weight of a checkpoint, from its config.json and its hf_quant_config.json.

Where checkpoints say how their weights are stored:

* ``quantization_config`` in config.json (transformers' quantizers): ``quant_method`` ``fp8`` /
  ``fbgemm_fp8`` (one byte), ``awq`` / ``gptq`` (``bits``, default 4), ``bitsandbytes``
  (``load_in_4bit`` / ``load_in_8bit``), ``mxfp4`` (gpt-oss: 4-bit values and one E8M0 scale per 32),
  ``modelopt`` (its ``quant_algo``, below), ``compressed-tensors`` (the ``num_bits`` of its first
  config group's weights; a float 4-bit group of 16 is NVFP4);
* ``hf_quant_config.json`` beside it (NVIDIA ModelOpt exports): ``quantization.quant_algo``
  ``FP8`` / ``FP8_BLOCK`` ..., ``NVFP4`` (4-bit values and one FP8 scale per 16: 9/16 byte),
  ``W4A16_AWQ`` / ``W4A8_AWQ`` (4-bit);
* otherwise the compute dtype (``torch_dtype``, or ``dtype`` in newer transformers).

Only the format is read: modules a checkpoint keeps in 16 bits (its exclusion lists) are counted at
the quantised size, so a mixed checkpoint's bytes are its parameters x the format's bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autotune.models.folder import CONFIG_DTYPE_BYTES, DEFAULT_DTYPE_BYTES, config_dtype, config_param

NVFP4_BYTES = 0.5 + 1 / 16  # 4-bit values, one FP8 scale per 16
MXFP4_BYTES = 0.5 + 1 / 32  # 4-bit values, one E8M0 scale per 32
_ALGO_BYTES = {"fp8": 1.0, "nvfp4": NVFP4_BYTES, "w4a16_awq": 0.5, "w4a8_awq": 0.5, "int4_awq": 0.5, "int8_sq": 1.0,
               "mxfp4": MXFP4_BYTES}
_METHOD_BYTES = {"fp8": 1.0, "fbgemm_fp8": 1.0, "mxfp4": MXFP4_BYTES}


def weight_bytes_per_param(config: Mapping[str, Any], hf_quant: Mapping[str, Any] | None = None) -> float:
    """Bytes one weight takes in the checkpoint (module doc)."""
    quant = config_param(config, "quantization_config")
    if isinstance(quant, Mapping):
        found = _quantization_config_bytes(quant)
        if found is not None:
            return found
    algo = ((hf_quant or {}).get("quantization") or {}).get("quant_algo") if isinstance(hf_quant, Mapping) else None
    if algo:
        return _algo_bytes(str(algo))
    return float(CONFIG_DTYPE_BYTES.get(config_dtype(config) or "", DEFAULT_DTYPE_BYTES))


def dtype_of_bytes(bytes_per_param: float) -> str:
    """The ``--dtype`` name of a weight size: bf16 (2 bytes and more), fp8 (1), fp4 (below 1)."""
    return "bf16" if bytes_per_param >= 2 else "fp8" if bytes_per_param >= 1 else "fp4"


def _quantization_config_bytes(quant: Mapping[str, Any]) -> float | None:
    method = str(quant.get("quant_method") or "").lower()
    if method in _METHOD_BYTES:
        return _METHOD_BYTES[method]
    if method in ("awq", "gptq"):
        return int(quant.get("bits") or 4) / 8
    if method == "bitsandbytes":
        return 0.5 if quant.get("load_in_4bit") else 1.0 if quant.get("load_in_8bit") else None
    if method == "modelopt" and quant.get("quant_algo"):
        return _algo_bytes(str(quant["quant_algo"]))
    if method == "compressed-tensors":
        for group in (quant.get("config_groups") or {}).values():
            weights = group.get("weights") or {} if isinstance(group, Mapping) else {}
            bits = weights.get("num_bits")
            if bits:
                nvfp4 = int(bits) == 4 and weights.get("type") == "float" and weights.get("group_size") == 16
                return NVFP4_BYTES if nvfp4 else int(bits) / 8
    return None


def _algo_bytes(algo: str) -> float:
    key = algo.lower()
    return 1.0 if key.startswith("fp8") else _ALGO_BYTES.get(key, float(DEFAULT_DTYPE_BYTES))
