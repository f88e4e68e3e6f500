"""Write small Hugging Face model folders for tests: config.json, tokenizer.json,
tokenizer_config.json, generation_config.json and real safetensors weights (written by the
``safetensors`` library, so the header reader is tested against the real format)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from safetensors.numpy import save_file

SPECIAL_TOKENS = ("<s>", "</s>", "<pad>", "<eot>")


def llama_config(vocab_size: int = 260, **overrides: Any) -> dict[str, Any]:
    """A tiny Llama-style config.json (GQA: 4 heads, 2 KV heads, head_dim 8)."""
    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": vocab_size, "hidden_size": 32,
        "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "max_position_embeddings": 4096, "torch_dtype": "bfloat16", "bos_token_id": 256, "eos_token_id": 257,
        "tie_word_embeddings": False,
    }
    config.update(overrides)
    return config


def tokenizer_json(regular: int = 256, special: tuple[str, ...] = SPECIAL_TOKENS, merges: list | None = None) -> dict:
    """A BPE tokenizer.json with ``regular`` tokens and the special tokens added after them."""
    vocab = {f"t{i}": i for i in range(regular)}
    added = [{"id": regular + i, "content": token, "special": True, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False} for i, token in enumerate(special)]
    return {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None, "pre_tokenizer": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges if merges is not None else ["t1 t2", "t3 t4"]},
    }


def write_model(
    folder: Path,
    config: dict[str, Any] | None = None,
    tokenizer: dict[str, Any] | None | bool = True,
    tokenizer_config: dict[str, Any] | None = None,
    generation_config: dict[str, Any] | None = None,
    weights: bool = True,
) -> Path:
    """A model folder; ``tokenizer=True`` writes :func:`tokenizer_json`, a dict writes that, None none.
    ``weights`` writes embeddings, layers and LM head matching the config as bf16-sized tensors."""
    folder.mkdir(parents=True, exist_ok=True)
    config = config or llama_config()
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    if tokenizer is True:
        tokenizer = tokenizer_json()
    if tokenizer:
        (folder / "tokenizer.json").write_text(json.dumps(tokenizer), encoding="utf-8")
    tokenizer_config = tokenizer_config if tokenizer_config is not None else {"bos_token": "<s>", "eos_token": "</s>"}
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    if generation_config is not None:
        (folder / "generation_config.json").write_text(json.dumps(generation_config), encoding="utf-8")
    if weights:
        save_file(model_tensors(config), str(folder / "model.safetensors"))
    return folder


def model_tensors(config: dict[str, Any]) -> dict[str, np.ndarray]:
    """Zero tensors with the shapes of a Llama checkpoint (float16: 2 bytes, as bfloat16)."""
    h, inner, vocab = config["hidden_size"], config["intermediate_size"], config["vocab_size"]
    heads, kv_heads = config["num_attention_heads"], config["num_key_value_heads"]
    head_dim = h // heads
    tensors = {"model.embed_tokens.weight": (vocab, h), "lm_head.weight": (vocab, h)}
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}"
        tensors |= {
            f"{p}.self_attn.q_proj.weight": (heads * head_dim, h), f"{p}.self_attn.k_proj.weight": (kv_heads * head_dim, h),
            f"{p}.self_attn.v_proj.weight": (kv_heads * head_dim, h), f"{p}.self_attn.o_proj.weight": (h, heads * head_dim),
            f"{p}.mlp.gate_proj.weight": (inner, h), f"{p}.mlp.up_proj.weight": (inner, h),
            f"{p}.mlp.down_proj.weight": (h, inner),
        }
    return {name: np.zeros(shape, dtype=np.float16) for name, shape in tensors.items()}


def parameter_count(config: dict[str, Any]) -> int:
    return sum(int(np.prod(t.shape)) for t in model_tensors(config).values())
