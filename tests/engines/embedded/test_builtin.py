import hashlib
import json
import math

import pytest
import torch
from safetensors.torch import save_file

from autotune.engines.embedded import builtin
from autotune.engines.embedded.builtin import (
    BUILTIN_DRAFT_NAME,
    BUILTIN_TARGET_NAME,
    load_builtin_draft,
    load_builtin_target,
    load_model,
    model_fingerprint,
    read_metadata,
    save_model,
)
from autotune.engines.embedded.network import CausalLM, ModelConfig
from autotune.engines.embedded.tokenizer import ByteTokenizer
from autotune.errors import EngineError

CONFIG = ModelConfig(vocab_size=30, d_model=16, n_layers=1, n_heads=2, d_ff=24, max_seq_len=32, n_mtp=1)
MAX_WEIGHTS_BYTES = 20_000_000


@pytest.fixture
def model() -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(CONFIG).eval()


@pytest.fixture
def saved(tmp_path, model):
    path = tmp_path / "model.safetensors"
    save_model(model, path, metadata={"name": "tiny", "step": 7})
    return path


# -- save / load -------------------------------------------------------------------------------------


def test_saved_model_reloads_with_its_config_and_fp16_rounded_weights(saved, model):
    loaded = load_model(saved)
    assert loaded.config == CONFIG
    assert not loaded.training
    assert loaded.embed.weight.dtype == torch.float32
    rounded = CausalLM(CONFIG).eval()
    rounded.load_state_dict({name: t.half().float() for name, t in model.state_dict().items()})
    tokens = torch.randint(0, CONFIG.vocab_size, (2, 9))
    with torch.no_grad():
        logits, hidden = loaded(tokens)
        torch.testing.assert_close(logits, rounded(tokens)[0])
        torch.testing.assert_close(loaded.mtp_forward(0, hidden, tokens)[0], rounded.mtp_forward(0, hidden, tokens)[0])


def test_load_model_honours_dtype_and_keeps_positions_exact(saved):
    low = load_model(saved, dtype=torch.bfloat16)
    assert low.head.weight.dtype == torch.bfloat16
    tokens = torch.randint(0, CONFIG.vocab_size, (1, 20))
    with torch.no_grad():
        torch.testing.assert_close(low(tokens)[0].float(), load_model(saved)(tokens)[0], atol=0.05, rtol=0.05)


def test_metadata_is_stored_as_strings_beside_the_config(saved):
    metadata = read_metadata(saved)
    assert metadata["name"] == "tiny"
    assert json.loads(metadata["step"]) == 7
    assert ModelConfig.from_dict(json.loads(metadata["config"])) == CONFIG


def test_config_metadata_key_is_reserved(tmp_path, model):
    with pytest.raises(ValueError, match="reserved"):
        save_model(model, tmp_path / "m.safetensors", metadata={"config": "{}"})


def test_load_model_reports_a_missing_file(tmp_path):
    with pytest.raises(EngineError, match="does not exist"):
        load_model(tmp_path / "absent.safetensors")


def test_load_model_reports_a_corrupt_file(tmp_path):
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00not a header")
    with pytest.raises(EngineError, match="not a readable safetensors file"):
        load_model(path)


def test_load_model_reports_a_truncated_file(saved):
    saved.write_bytes(saved.read_bytes()[:-100])
    with pytest.raises(EngineError, match=str(saved.name)):
        load_model(saved)


def test_load_model_requires_config_metadata(tmp_path):
    path = tmp_path / "bare.safetensors"
    save_file({"x": torch.zeros(2)}, str(path))
    with pytest.raises(EngineError, match="no 'config' metadata"):
        load_model(path)


def test_load_model_rejects_an_invalid_config(tmp_path):
    path = tmp_path / "bad-config.safetensors"
    save_file({"x": torch.zeros(2)}, str(path), metadata={"config": json.dumps({"d_model": 3})})
    with pytest.raises(EngineError, match="invalid config"):
        load_model(path)


def test_load_model_rejects_weights_that_do_not_match_the_config(tmp_path, model):
    path = tmp_path / "mismatch.safetensors"
    wider = ModelConfig(**{**CONFIG.to_dict(), "d_model": 32})
    tensors = {name: t.half() for name, t in model.state_dict().items()}
    save_file(tensors, str(path), metadata={"config": json.dumps(wider.to_dict())})
    with pytest.raises(EngineError, match="does not match its config"):
        load_model(path)


def test_fingerprint_is_the_sha256_of_the_file(saved, model):
    assert model_fingerprint(saved) == hashlib.sha256(saved.read_bytes()).hexdigest()
    before = model_fingerprint(saved)
    with torch.no_grad():
        model.head.weight.add_(1.0)
    save_model(model, saved)
    assert model_fingerprint(saved) != before


# -- shipped models ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def target() -> CausalLM:
    return load_builtin_target()


@pytest.fixture(scope="module")
def draft() -> CausalLM:
    return load_builtin_draft()


def test_builtin_names_differ():
    assert BUILTIN_TARGET_NAME != BUILTIN_DRAFT_NAME


def test_builtin_models_share_the_tokenizer_vocabulary(target, draft):
    assert target.config.vocab_size == draft.config.vocab_size == ByteTokenizer.vocab_size


def test_builtin_target_has_mtp_modules_and_is_larger_than_the_draft(target, draft):
    assert target.config.n_mtp >= 1
    assert draft.config.n_mtp == 0
    n_params = [sum(p.numel() for p in m.parameters()) for m in (target, draft)]
    assert n_params[0] > 4 * n_params[1]
    assert not target.training and not draft.training


def test_builtin_weights_fit_the_package_budget():
    total = builtin.TARGET_PATH.stat().st_size + builtin.DRAFT_PATH.stat().st_size
    assert total <= MAX_WEIGHTS_BYTES


def test_builtin_models_have_learned_python(target, draft):
    tokenizer = ByteTokenizer()
    text = "import os\n\n\ndef main(argv=None):\n    if argv is None:\n        argv = sys.argv[1:]\n    return 0\n"
    tokens = torch.tensor([tokenizer.encode(text)])
    uniform_loss = math.log(tokenizer.vocab_size)
    with torch.no_grad():
        for model in (target, draft):
            logits, _ = model(tokens[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits[0], tokens[0, 1:]).item()
            assert loss < uniform_loss / 2


def test_training_record_describes_the_shipped_weights():
    record = json.loads((builtin.WEIGHTS_DIR / "training.json").read_text())
    assert record["corpus"]["n_files"] > 0
    assert len(record["corpus"]["sha256"]) == 64
    for name, path in (("target", builtin.TARGET_PATH), ("draft", builtin.DRAFT_PATH)):
        assert record[name]["steps"] > 0
        assert record[name]["wall_s"] > 0
        assert ModelConfig.from_dict(record[name]["config"]) == load_model(path).config
