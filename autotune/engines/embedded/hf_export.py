"""Write embedded :class:`CausalLM` models as Hugging Face ``LlamaForCausalLM`` checkpoints (the
target also as ``MiMoForCausalLM``, see below).

A folder holds ``config.json``, ``generation_config.json``, ``model.safetensors`` (fp32, Llama
names), ``tokenizer.json`` and ``tokenizer_config.json``. ``transformers`` loads it with
``AutoModelForCausalLM`` / ``AutoTokenizer`` and reproduces the embedded engine's logits and greedy
output (tests/engines/embedded/test_hf_export.py), so engines that load Hugging Face folders (vLLM,
TensorRT-LLM) can be checked against ours.

Conversion of our layout to Llama's:

* ``layers.i.attn.qkv`` (3C x C, rows [q; k; v]) splits into ``q_proj``/``k_proj``/``v_proj``;
  q and k rows are permuted per head for Llama's rotate-half RoPE (see :func:`rope_permutation`).
* ``mlp.gate_up`` (2F x C, rows [gate; up]) splits into ``gate_proj``/``up_proj``.
* ``attn_norm``/``mlp_norm`` are ``input_layernorm``/``post_attention_layernorm``; the head is
  untied from the embedding (``tie_word_embeddings: false``).

MTP modules (``with_mtp=True``, the target) go to a second file, ``mtp/model.safetensors``, named after
Xiaomi MiMo's published checkpoint layout, which vLLM's MiMo MTP drafter reads::

    model.mtp_layers.{k}.hidden_layernorm.weight   # our mtp.k.hidden_norm
    model.mtp_layers.{k}.token_layernorm.weight    # our mtp.k.embed_norm
    model.mtp_layers.{k}.input_proj.weight         # our mtp.k.proj, input [norm(h); norm(emb)]
    model.mtp_layers.{k}.final_layernorm.weight    # a copy of the shared final norm
    model.mtp_layers.{k}.{self_attn,mlp,input_layernorm,post_attention_layernorm}.*  # the block

``config.json`` then has ``num_nextn_predict_layers``. A separate file, in a subfolder, keeps the
folder a plain Llama checkpoint: ``transformers`` loads it with no unexpected-weight warnings, and
vLLM, whose loader reads every ``*.safetensors`` at the top of the folder, loads it as
``LlamaForCausalLM`` (with ``mtp.safetensors`` beside ``model.safetensors`` it failed: "There is no
module or parameter named 'mtp_layers' in LlamaModel"). vLLM runs no MTP for a Llama target; the
names are the ones its MiMo drafter reads from the MiMo export below (checked with vLLM 0.32.0,
docs/vllm.md "MTP through vLLM").

``architecture="mimo"`` (``autotune models export-hf --format mimo``) writes the target as a Xiaomi
MiMo checkpoint instead, which vLLM 0.32.0 loads and runs with its MiMo MTP drafter
(``speculative_config {"method": "mtp"}``; ``SpeculativeConfig.hf_config_override`` maps architecture
``MiMoForCausalLM`` to ``MiMoMTPModel``). Measured there: greedy output equal to ours, depth-1
acceptance within 0.3 percentage points of ours (docs/vllm.md, "MTP through vLLM (MiMo export)").

* ``config.json`` names ``architectures: ["MiMoForCausalLM"]`` with ``model_type: "qwen2"`` (MiMo's
  own ``"mimo"`` needs its remote code: neither transformers 5.19 nor vLLM 0.32 registers a config
  for it; vLLM's ``MiMoForCausalLM`` is a ``Qwen2ForCausalLM`` and reads only Qwen2 keys) and
  ``num_nextn_predict_layers``.
* The main weights keep their Llama/Qwen2 names (the same tensors as the llama export, RoPE rows
  permuted) plus ZERO ``q_proj``/``k_proj``/``v_proj`` biases: Qwen2 attention always has them.
* The MTP modules are in the same ``model.safetensors`` under ``model.mtp_layers.{k}.*`` (as in
  MiMo's checkpoints; vLLM's ``MiMoForCausalLM`` drops those names, ``MiMoMTP`` keeps only them and
  the shared embedding/head), their blocks' q/k rows permuted the same way and zero q/k/v biases.

vLLM's MiMo MTP computes ``final_layernorm(block(input_proj([hidden_layernorm(h);
token_layernorm(emb)])))`` and applies ``lm_head`` to it, as our module k followed by the shared
final norm and head does. It differs in three ways, none of which the export can change: it runs
module 0 only, for every draft position (at depth 1 ours runs module 0 alone too); from the
second draft on it feeds module 0 the previous draft's NORMED output (``final_layernorm``), where
ours feeds module 1 the un-normed one; and it zeroes the token embedding at position 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from safetensors.torch import save_file

from autotune.engines.embedded.network import NORM_EPS, ROPE_BASE, Block, CausalLM
from autotune.engines.embedded.tokenizer import N_BYTES, ByteTokenizer

WEIGHTS_FILE = "model.safetensors"
MTP_WEIGHTS_FILE = "mtp/model.safetensors"  # not at the top: see the module doc
BOS_TOKEN, EOS_TOKEN, PAD_TOKEN = "<s>", "</s>", "<pad>"
BUILTIN_CHOICES = ("target", "draft", "both")
ARCHITECTURES = ("llama", "mimo")  # export_hf(architecture=...): see the module doc
QKV_BIAS_NAMES = ("q_proj", "k_proj", "v_proj")


def rope_permutation(head_dim: int) -> torch.Tensor:
    """Index (Dh,) that reorders one head's q/k output rows from interleaved to rotate-half RoPE.

    Ours rotates consecutive pairs: (x[2j], x[2j+1]) by angle p * theta_j, theta_j = base^(-2j/Dh),
    j < Dh/2. Llama's rotate-half rotates (x[j], x[j + Dh/2]) by the same p * theta_j. With
    y = x[perm], perm = [0, 2, 4, ..., Dh-2, 1, 3, ..., Dh-1], y[j] = x[2j] and y[j + Dh/2] =
    x[2j+1], so Llama's rotation of y is our rotation of x, reordered the same way. Reordering
    the rows of W_q (C x C viewed as H x Dh x C) and W_k by perm within each head gives q' = q[perm],
    k' = k[perm] per head, and q'.k' = q.k: attention scores, hence outputs, are unchanged. v and
    o_proj are untouched.
    """
    if head_dim % 2:
        raise ValueError(f"head_dim must be even, got {head_dim}")
    return torch.cat([torch.arange(0, head_dim, 2), torch.arange(1, head_dim, 2)])


def _permute_heads(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """(H*Dh, C) q or k weight with each head's rows reordered by :func:`rope_permutation`."""
    rows, cols = weight.shape
    head_dim = rows // n_heads
    return weight.view(n_heads, head_dim, cols)[:, rope_permutation(head_dim)].reshape(rows, cols)


def _block_tensors(block: Block, prefix: str, n_heads: int) -> dict[str, torch.Tensor]:
    """Llama names of one of our blocks under ``prefix`` (e.g. ``model.layers.0.``)."""
    q, k, v = block.attn.qkv.weight.chunk(3, dim=0)  # each (C, C)
    gate, up = block.mlp.gate_up.weight.chunk(2, dim=0)  # each (F, C)
    return {
        f"{prefix}input_layernorm.weight": block.attn_norm.weight,
        f"{prefix}self_attn.q_proj.weight": _permute_heads(q, n_heads),
        f"{prefix}self_attn.k_proj.weight": _permute_heads(k, n_heads),
        f"{prefix}self_attn.v_proj.weight": v,
        f"{prefix}self_attn.o_proj.weight": block.attn.out.weight,
        f"{prefix}post_attention_layernorm.weight": block.mlp_norm.weight,
        f"{prefix}mlp.gate_proj.weight": gate,
        f"{prefix}mlp.up_proj.weight": up,
        f"{prefix}mlp.down_proj.weight": block.mlp.down.weight,
    }


def hf_state_dict(model: CausalLM) -> dict[str, torch.Tensor]:
    """The main model's weights under Llama names (MTP modules excluded)."""
    n_heads = model.config.n_heads
    tensors = {"model.embed_tokens.weight": model.embed.weight}
    for i, block in enumerate(model.layers):
        tensors.update(_block_tensors(block, f"model.layers.{i}.", n_heads))
    tensors["model.norm.weight"] = model.norm.weight
    tensors["lm_head.weight"] = model.head.weight
    return tensors


def mtp_state_dict(model: CausalLM) -> dict[str, torch.Tensor]:
    """The MTP modules' weights under MiMo's ``model.mtp_layers.{k}.*`` names (see module doc)."""
    tensors = {}
    for k, module in enumerate(model.mtp):
        prefix = f"model.mtp_layers.{k}."
        tensors[f"{prefix}hidden_layernorm.weight"] = module.hidden_norm.weight
        tensors[f"{prefix}token_layernorm.weight"] = module.embed_norm.weight
        tensors[f"{prefix}input_proj.weight"] = module.proj.weight  # (C, 2C): input [norm(h); norm(emb)]
        tensors[f"{prefix}final_layernorm.weight"] = model.norm.weight
        tensors.update(_block_tensors(module.block, prefix, model.config.n_heads))
    return tensors


def _zero_qkv_biases(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """``tensors`` plus zero ``{q,k,v}_proj.bias`` next to every ``{q,k,v}_proj.weight`` (Qwen2 attention)."""
    out = dict(tensors)
    for name, weight in tensors.items():
        for proj in QKV_BIAS_NAMES:
            if name.endswith(f".self_attn.{proj}.weight"):
                out[name[: -len("weight")] + "bias"] = torch.zeros(weight.shape[0], dtype=weight.dtype)
    return out


def mimo_state_dict(model: CausalLM, *, with_mtp: bool) -> dict[str, torch.Tensor]:
    """The weights of the MiMo export (module doc): main model and, with ``with_mtp``, the MTP
    modules in one dict, with zero q/k/v biases for every attention."""
    tensors = hf_state_dict(model)
    if with_mtp:
        tensors.update(mtp_state_dict(model))
    return _zero_qkv_biases(tensors)


def hf_config(model: CausalLM, tokenizer: ByteTokenizer, *, with_mtp: bool) -> dict:
    """``config.json`` of the Llama checkpoint of ``model``."""
    c = model.config
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": c.vocab_size,
        "hidden_size": c.d_model,
        "intermediate_size": c.d_ff,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_heads,
        "num_key_value_heads": c.n_heads,
        "head_dim": c.head_dim,
        "hidden_act": "silu",
        "max_position_embeddings": c.max_seq_len,
        "rms_norm_eps": NORM_EPS,
        # transformers 5 reads rope_parameters; rope_theta is the older key other loaders read.
        "rope_theta": ROPE_BASE,
        "rope_parameters": {"rope_type": "default", "rope_theta": ROPE_BASE},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "mlp_bias": False,
        "tie_word_embeddings": False,
        "bos_token_id": tokenizer.bos_id,
        "eos_token_id": tokenizer.eos_id,
        "pad_token_id": tokenizer.pad_id,
        "torch_dtype": "float32",
        "use_cache": True,
    }
    if with_mtp:
        config["num_nextn_predict_layers"] = c.n_mtp
    return config


def mimo_config(model: CausalLM, tokenizer: ByteTokenizer, *, with_mtp: bool) -> dict:
    """``config.json`` of the MiMo export: Qwen2 keys (what vLLM's ``MiMoForCausalLM``, a
    ``Qwen2ForCausalLM``, reads) under architecture ``MiMoForCausalLM`` and model type ``qwen2``."""
    config = hf_config(model, tokenizer, with_mtp=with_mtp)
    for key in ("attention_bias", "mlp_bias", "head_dim"):  # Llama keys; Qwen2 has q/k/v biases, head_dim = C / H
        del config[key]
    config.update({
        "architectures": ["MiMoForCausalLM"],
        "model_type": "qwen2",
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": model.config.n_layers,
    })
    return config


def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte -> printable character map, which the ``ByteLevel`` pre-tokenizer applies."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(N_BYTES):
        if b not in chars:
            chars[b] = chr(N_BYTES + extra)
            extra += 1
    return chars


def tokenizer_json(tokenizer: ByteTokenizer) -> dict:
    """A ``tokenizers`` BPE with no merges over byte-level pre-tokenization: every UTF-8 byte b is
    token id b, as in :meth:`ByteTokenizer.encode`; a template adds BOS. The specials are added
    tokens, so a prompt containing the literal text ``<s>`` would differ (ours encodes its bytes)."""
    specials = [(tokenizer.bos_id, BOS_TOKEN), (tokenizer.eos_id, EOS_TOKEN), (tokenizer.pad_id, PAD_TOKEN)]
    vocab = {char: byte for byte, char in _bytes_to_unicode().items()}
    vocab.update({content: token_id for token_id, content in specials})
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {"id": token_id, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
             "normalized": False, "special": True}
            for token_id, content in specials
        ],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": BOS_TOKEN, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": BOS_TOKEN, "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {BOS_TOKEN: {"id": BOS_TOKEN, "ids": [tokenizer.bos_id], "tokens": [BOS_TOKEN]}},
        },
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False},
        "model": {
            "type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
            "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
            "vocab": vocab, "merges": [],
        },
    }


def tokenizer_config(model: CausalLM) -> dict:
    """``tokenizer_config.json``: the fast tokenizer class (not LlamaTokenizer, which would rebuild
    its own pre-tokenizer) and the special tokens."""
    return {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": BOS_TOKEN,
        "eos_token": EOS_TOKEN,
        "pad_token": PAD_TOKEN,
        "add_bos_token": True,
        "add_eos_token": False,
        "clean_up_tokenization_spaces": False,
        "model_max_length": model.config.max_seq_len,
    }


def _save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    # clone: safetensors refuses tensors that share memory (the MTP final norms are one tensor).
    save_file({name: t.detach().to("cpu", torch.float32).clone().contiguous() for name, t in tensors.items()}, str(path),
              metadata={"format": "pt"})
    path.chmod(0o644)  # safetensors creates 0600 files


def _write_json(path: Path, data: dict) -> None:
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def export_hf(model: CausalLM, tokenizer: ByteTokenizer, folder: Path, *, with_mtp: bool,
              architecture: str = "llama") -> Path:
    """Write ``model`` as a Hugging Face checkpoint into ``folder`` (created); return it.

    ``architecture`` "llama" (default): a Llama checkpoint; ``with_mtp`` also writes the MTP modules
    to ``mtp/model.safetensors``. "mimo": a ``MiMoForCausalLM`` checkpoint for vLLM's MiMo MTP drafter,
    the MTP modules (``with_mtp``) in ``model.safetensors`` itself. See the module doc for both.
    ``with_mtp`` needs a model with MTP modules. Existing files of the same names are overwritten.
    """
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
    if model.config.vocab_size != tokenizer.vocab_size:
        raise ValueError(f"model vocab_size {model.config.vocab_size} != tokenizer vocab_size {tokenizer.vocab_size}")
    if with_mtp and model.config.n_mtp == 0:
        raise ValueError("with_mtp=True needs a model with MTP modules (config.n_mtp == 0)")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        if architecture == "mimo":
            _save_tensors(mimo_state_dict(model, with_mtp=with_mtp), folder / WEIGHTS_FILE)
        else:
            _save_tensors(hf_state_dict(model), folder / WEIGHTS_FILE)
            if with_mtp:
                (folder / MTP_WEIGHTS_FILE).parent.mkdir(exist_ok=True)
                _save_tensors(mtp_state_dict(model), folder / MTP_WEIGHTS_FILE)
    make_config = mimo_config if architecture == "mimo" else hf_config
    _write_json(folder / "config.json", make_config(model, tokenizer, with_mtp=with_mtp))
    _write_json(folder / "generation_config.json", {
        "bos_token_id": tokenizer.bos_id, "eos_token_id": tokenizer.eos_id, "pad_token_id": tokenizer.pad_id,
        "do_sample": False,
    })
    _write_json(folder / "tokenizer.json", tokenizer_json(tokenizer))
    _write_json(folder / "tokenizer_config.json", tokenizer_config(model))
    return folder


def export_builtin(out: Path, which: str = "both", *, force: bool = False, architecture: str = "llama") -> list[Path]:
    """Export the built-in target (with MTP) and/or draft to ``out/<model name>``; return the folders.

    ``architecture`` as in :func:`export_hf`; "mimo" applies to the target only (the draft has no MTP
    modules and stays a Llama folder). Raises FileExistsError naming the folder when one exists and
    is not empty, unless ``force``.
    """
    from autotune.engines.embedded.builtin import (
        BUILTIN_DRAFT_NAME,
        BUILTIN_TARGET_NAME,
        load_builtin_draft,
        load_builtin_target,
    )

    if which not in BUILTIN_CHOICES:
        raise ValueError(f"which must be one of {', '.join(BUILTIN_CHOICES)}, got {which!r}")
    if architecture not in ARCHITECTURES:
        raise ValueError(f"architecture must be one of {', '.join(ARCHITECTURES)}, got {architecture!r}")
    jobs = []
    if which in ("target", "both"):
        jobs.append((BUILTIN_TARGET_NAME, load_builtin_target, True))
    if which in ("draft", "both"):
        jobs.append((BUILTIN_DRAFT_NAME, load_builtin_draft, False))
    out = Path(out)
    folders = [out / name for name, _, _ in jobs]
    for folder in folders:
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())) and not force:
            raise FileExistsError(f"{folder} exists and is not empty; pass --force to overwrite it")
    tokenizer = ByteTokenizer()
    for folder, (_, load, with_mtp) in zip(folders, jobs):
        export_hf(load(dtype=torch.float32), tokenizer, folder, with_mtp=with_mtp,
                  architecture=architecture if with_mtp else "llama")
    return folders
