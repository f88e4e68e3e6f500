"""NVIDIA's measured kernel data, through aiconfigurator-core: the only module that imports it.

aiconfigurator-core (PyPI, Apache-2.0; read at 0.12.0) ships per-kernel timings (GEMM, attention,
MLA, MoE, all-reduce, ...) collected on each GPU for each serving engine and version, and composes a
model's step from them. What this module uses of it, as read in its sources:

* ``aiconfigurator_core.sdk.engine.EngineHandle.compile(model_path, system, backend,
  backend_version=, tp_size=, moe_tp_size=, moe_ep_size=, gemm_quant_mode=, moe_quant_mode=,
  kvcache_quant_mode=)`` builds the model's op lists (``sdk/engine.py`` ``compile_engine``);
  ``model_path`` may be a local folder holding ``config.json`` (and ``hf_quant_config.json``),
  read by ``sdk/utils.py`` ``_load_model_config_from_model_path`` — a folder, so nothing is
  downloaded;
* ``decode_step_per_op(gen_tokens, isl, osl)``: each op of one decoding step of ``gen_tokens``
  rows at context ``isl`` (osl 2: the step right after the prompt), as ``(name, ms, energy,
  source)``, summed over the layers; ``source`` is ``silicon`` for a measured row and
  ``empirical`` / ``mixed`` where the library fits or mixes rows;
* ``predict_prefill_latency(rows, isl)``: the prefill of ``rows`` prompts of ``isl`` tokens, ms;
* ``sdk/perf_database.py`` ``get_supported_databases()`` and ``get_version_slots(system,
  backend)``: which GPU, engine and version have data (``current`` is the library's default);
* it logs "Loading low-fidelity fallback rows for TABLE" when a table falls back to rows it
  marks framework-implicit: those lines are collected (:attr:`SiliconModel.low_fidelity`) and
  shown in the plan instead of on stderr.

Everything else (which part of a speculative step each call prices, the fall-backs) is
:mod:`autotune.perfmodel.silicon_cost`. Without the package, :func:`require` raises one line that
says how to install it.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from autotune.errors import ConfigurationError

PACKAGE = "aiconfigurator-core"
INSTALL = 'pip install -e ".[plan]" (aiconfigurator-core, NVIDIA\'s measured kernel data)'
# The catalog's GPUs (their NVML names) that aiconfigurator-core 0.12.0 has data for: the system
# names of its systems/*.yaml with a data folder (get_supported_databases()).
SYSTEMS = {
    "NVIDIA H100 80GB HBM3": "h100_sxm",
    "NVIDIA H200": "h200_sxm",
    "NVIDIA B200": "b200_sxm",
    "NVIDIA B300": "b300_sxm",
    "NVIDIA GB200": "gb200",
    "NVIDIA A100-SXM4-80GB": "a100_sxm",
    "NVIDIA L40S": "l40s",
}
# Our --dtype / --kv-dtype -> the library's quant modes (sdk/common.py GEMMQuantMode, MoEQuantMode,
# KVCacheQuantMode); None lets it read the checkpoint's own.
GEMM_MODES = {"bf16": "bfloat16", "fp8": "fp8", "fp4": "nvfp4"}
KV_MODES = {"bf16": "bfloat16", "fp8": "fp8"}
_LOW_FIDELITY = re.compile(r"low-fidelity fallback rows for (\S+)")


class SiliconMissing(ConfigurationError):
    """The data cannot price this deployment (no package, GPU, engine version or model support)."""


class VersionMissing(SiliconMissing):
    """The data has the GPU and engine but not the engine version asked for."""


def require() -> str:
    """The installed aiconfigurator-core's version; SiliconMissing saying how to install it."""
    try:
        import aiconfigurator_core  # noqa: F401 - the import is the check
    except ImportError:
        raise SiliconMissing(f"{PACKAGE} is not installed: {INSTALL}") from None
    return metadata.version(PACKAGE)


@dataclass(frozen=True)
class SiliconData:
    """Which of the library's data prices a plan: its version, the GPU's system name, the engine and
    the engine version the kernels were measured with."""

    package_version: str
    system: str
    engine: str
    engine_version: str

    def label(self) -> str:
        return f"{PACKAGE} {self.package_version}, {self.system} {self.engine} {self.engine_version}"


def locate(nvml_name: str, engine: str, engine_version: str | None) -> SiliconData:
    """The data for the GPU NVML calls ``nvml_name`` served by ``engine`` at ``engine_version``
    (None: the library's current one); SiliconMissing naming what it has otherwise."""
    package_version = require()
    from aiconfigurator_core.sdk import perf_database

    system = SYSTEMS.get(nvml_name)
    if system is None:
        raise SiliconMissing(f"{PACKAGE} {package_version} has no measured data for the {nvml_name or 'device'} "
                             f"(it has: {', '.join(sorted(SYSTEMS))})")
    with _quiet():
        slots = perf_database.get_version_slots(system, engine) or {}
    versions = sorted(set(slots.values()))
    if not versions:
        raise SiliconMissing(f"{PACKAGE} {package_version} has no {engine} data for {system}")
    wanted = engine_version or slots.get("current") or versions[-1]
    if wanted not in versions:
        raise VersionMissing(f"{PACKAGE} {package_version} has no {engine} {wanted} data for {system} "
                             f"(it has {', '.join(versions)})")
    return SiliconData(package_version, system, engine, wanted)


@dataclass(frozen=True)
class SiliconBuild:
    """How the library builds a model: against ``data``, for ``tp`` GPUs (MoE: ``ep`` of them split
    the experts, the rest split each expert), in ``dtype`` / ``kv_dtype`` (None: the checkpoint's),
    attention computed in ``fmha`` (None: as the library infers)."""

    data: SiliconData
    tp: int
    ep: int = 1
    dtype: str | None = None
    kv_dtype: str | None = None
    fmha: str | None = None


@dataclass
class SiliconModel:
    """A model compiled against :class:`SiliconData` (module doc): per-op step times, and what of
    the data it fell back on."""

    name: str
    data: SiliconData
    handle: Any
    low_fidelity: set[str] = field(default_factory=set)  # tables the library fell back to (module doc)

    @classmethod
    def compile(cls, name: str, config: Mapping[str, Any], quant: Mapping[str, Any] | None,
                build: SiliconBuild) -> SiliconModel:
        """``config`` (a config.json's object; ``quant``: its hf_quant_config.json) as the library
        builds it as ``build`` says; SiliconMissing when it cannot."""
        from aiconfigurator_core.sdk.engine import EngineHandle

        data, tp, ep, dtype = build.data, build.tp, build.ep, build.dtype
        modes = {"gemm_quant_mode": GEMM_MODES.get(dtype or ""), "moe_quant_mode": GEMM_MODES.get(dtype or ""),
                 "kvcache_quant_mode": KV_MODES.get(build.kv_dtype or ""), "fmha_quant_mode": GEMM_MODES.get(build.fmha or "")}
        model = cls(name, data, None)
        with tempfile.TemporaryDirectory(prefix="autotune-silicon-") as folder, model._collect():
            (Path(folder) / "config.json").write_text(json.dumps(config), encoding="utf-8")
            if quant:
                (Path(folder) / "hf_quant_config.json").write_text(json.dumps(quant), encoding="utf-8")
            try:
                model.handle = EngineHandle.compile(
                    folder, data.system, data.engine, backend_version=data.engine_version, tp_size=tp,
                    moe_tp_size=tp // ep, moe_ep_size=ep, **{k: v for k, v in modes.items() if v})
            except Exception as exc:  # the library raises ValueError, KeyError, AssertionError, its own errors
                reason = " ".join(str(exc).split())[:300] or type(exc).__name__
                raise SiliconMissing(f"{PACKAGE} cannot build {name} for {data.system} {data.engine}: {reason}") from None
        return model

    def decode_ops(self, rows: int, context: int) -> list[tuple[str, float, str]]:
        """One decoding step of ``rows`` rows at ``context`` cached tokens: ``(op, seconds, source)``."""
        with self._collect(), self._missing():
            ops = self.handle.decode_step_per_op(rows, max(context, 1), 2)
        return [(name, ms / 1000, str(source)) for name, ms, _, source in ops]

    def prefill_s(self, rows: int, prompt: int) -> float:
        """The prefill of ``rows`` prompts of ``prompt`` tokens."""
        with self._collect(), self._missing():
            return self.handle.predict_prefill_latency(rows, max(prompt, 1)) / 1000

    @contextmanager
    def _missing(self) -> Iterator[None]:
        """A table the data lacks for this model (its PerfDataNotAvailableError) as SiliconMissing."""
        try:
            yield
        except Exception as exc:  # the library's own error types, raised from its Rust core
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise SiliconMissing(f"{PACKAGE} {self.data.package_version} cannot price {self.name} on "
                                 f"{self.data.system} {self.data.engine} {self.data.engine_version}: {reason}") from None

    @contextmanager
    def _collect(self) -> Iterator[None]:
        with _quiet() as records:
            yield
        for record in records:
            found = _LOW_FIDELITY.search(record.getMessage())
            if found:
                self.low_fidelity.add(Path(found.group(1)).stem)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def _quiet() -> Iterator[list[logging.LogRecord]]:
    """The library's log records, kept from stderr: a plan prints what matters of them itself."""
    logger = logging.getLogger("aiconfigurator_core")
    handler, propagate, level = _Records(), logger.propagate, logger.level
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.WARNING)
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.propagate, logger.level = propagate, level
