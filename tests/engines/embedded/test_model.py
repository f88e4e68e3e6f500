import pytest
import torch

from autotune.engines.embedded.network import CausalLM, KVCache, ModelConfig

ATOL = 1e-5
CONFIG = ModelConfig(vocab_size=40, d_model=32, n_layers=3, n_heads=4, d_ff=48, max_seq_len=64, n_mtp=2)


@pytest.fixture(scope="module")
def model() -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(CONFIG).eval()


@pytest.fixture
def tokens() -> torch.Tensor:
    return torch.randint(0, CONFIG.vocab_size, (3, 12), generator=torch.Generator().manual_seed(1))


# -- config ---------------------------------------------------------------------------------------


def test_config_round_trips_through_dict():
    assert ModelConfig.from_dict(CONFIG.to_dict()) == CONFIG


def test_config_rejects_unknown_keys():
    with pytest.raises(ValueError, match="unknown"):
        ModelConfig.from_dict({**CONFIG.to_dict(), "dropout": 0.1})


@pytest.mark.parametrize(
    "change",
    [{"d_model": 30}, {"n_heads": 0}, {"n_mtp": -1}, {"d_model": 12, "n_heads": 4}, {"vocab_size": 2.5}],
)
def test_config_rejects_invalid_shapes(change):
    with pytest.raises(ValueError):
        ModelConfig(**{**CONFIG.to_dict(), **change})


# -- uncached forward -------------------------------------------------------------------------------


def test_forward_returns_logits_and_pre_norm_hidden(model, tokens):
    with torch.no_grad():
        logits, hidden = model(tokens)
        assert logits.shape == (3, 12, CONFIG.vocab_size)
        assert hidden.shape == (3, 12, CONFIG.d_model)
        torch.testing.assert_close(logits, model.head(model.norm(hidden)))


def test_forward_is_causal(model, tokens):
    changed = tokens.clone()
    changed[:, 8:] = (changed[:, 8:] + 1) % CONFIG.vocab_size
    with torch.no_grad():
        logits, changed_logits = model(tokens)[0], model(changed)[0]
    torch.testing.assert_close(logits[:, :8], changed_logits[:, :8])
    assert not torch.allclose(logits[:, 8:], changed_logits[:, 8:])


def test_forward_rejects_bad_tokens(model):
    with pytest.raises(ValueError, match="long"):
        model(torch.zeros(1, 4))
    with pytest.raises(ValueError, match="max_seq_len"):
        model(torch.zeros(1, CONFIG.max_seq_len + 1, dtype=torch.long))
    with pytest.raises(ValueError, match="need a cache"):
        model(torch.zeros(1, 4, dtype=torch.long), n_new=[4])


# -- cached forward ---------------------------------------------------------------------------------


@pytest.mark.parametrize("chunks", [(12,), (5, 1, 6), (1,) * 12, (3, 4, 5)])
def test_incremental_cached_forward_equals_full_forward(model, tokens, chunks):
    cache = model.new_cache(3, capacity=16)
    with torch.no_grad():
        full_logits, full_hidden = model(tokens)
        pieces, hiddens, start = [], [], 0
        for size in chunks:
            logits, hidden = model(tokens[:, start : start + size], cache)
            pieces.append(logits)
            hiddens.append(hidden)
            start += size
    torch.testing.assert_close(torch.cat(pieces, 1), full_logits, atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.cat(hiddens, 1), full_hidden, atol=ATOL, rtol=0)
    assert cache.lengths.tolist() == [12, 12, 12]


def test_right_padded_rows_advance_by_n_new_and_padding_is_ignored(model, tokens):
    cache = model.new_cache(2, capacity=16)
    padded = tokens[:2, :6].clone()
    padded[1, 3:] = 0  # row 1 has 3 real tokens, then padding
    with torch.no_grad():
        first, _ = model(padded, cache, n_new=[6, 3])
        assert cache.lengths.tolist() == [6, 3]
        # Continue both rows with one token each: row 1's next position is 3, over its padding.
        step_tokens = torch.stack([tokens[0, 6:7], tokens[1, 3:4]])
        second, _ = model(step_tokens, cache)
        row0, _ = model(tokens[:1, :7])
        row1, _ = model(tokens[1:2, :4])
    torch.testing.assert_close(first[0], row0[0, :6], atol=ATOL, rtol=0)
    torch.testing.assert_close(first[1, :3], row1[0, :3], atol=ATOL, rtol=0)
    torch.testing.assert_close(second[0, 0], row0[0, 6], atol=ATOL, rtol=0)
    torch.testing.assert_close(second[1, 0], row1[0, 3], atol=ATOL, rtol=0)
    assert cache.lengths.tolist() == [7, 4]


def test_slots_let_one_request_prefill_while_another_decodes(model, tokens):
    cache = model.new_cache(3, capacity=16)
    with torch.no_grad():
        model(tokens[:1, :5], cache, slots=[0])  # request A prefilled into slot 0
        model(tokens[1:2, :8], cache, slots=[2])  # request B prefilled into slot 2
        # One batched decode step: B (slot 2) at position 8 and A (slot 0) at position 5.
        logits, _ = model(torch.stack([tokens[1, 8:9], tokens[0, 5:6]]), cache, slots=torch.tensor([2, 0]))
        alone_a, _ = model(tokens[:1, :6])
        alone_b, _ = model(tokens[1:2, :9])
    torch.testing.assert_close(logits[0, 0], alone_b[0, 8], atol=ATOL, rtol=0)
    torch.testing.assert_close(logits[1, 0], alone_a[0, 5], atol=ATOL, rtol=0)
    assert cache.lengths.tolist() == [6, 0, 9]


def test_cached_forward_rejects_bad_arguments(model):
    cache = model.new_cache(2, capacity=8)
    two = torch.zeros(2, 2, dtype=torch.long)
    with pytest.raises(ValueError, match="distinct"):
        model(two, cache, slots=[1, 1])
    with pytest.raises(ValueError, match="slots must be in"):
        model(two, cache, slots=[0, 2])
    with pytest.raises(ValueError, match="n_new"):
        model(two, cache, n_new=[3, 1])
    with pytest.raises(ValueError, match="does not fit"):
        model(torch.zeros(3, 1, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="capacity"):
        model(torch.zeros(1, 9, dtype=torch.long), cache)
    with pytest.raises(ValueError, match="layers"):
        model(two, model.new_mtp_cache(2, capacity=8))
    assert cache.lengths.tolist() == [0, 0]


# -- KV cache -------------------------------------------------------------------------------------------


def test_cache_shape_reset_and_size(model):
    cache = model.new_cache(3, capacity=10)
    assert isinstance(cache, KVCache)
    assert cache.k.shape == (CONFIG.n_layers, 3, CONFIG.n_heads, 10, CONFIG.head_dim)
    assert cache.nbytes() == 2 * cache.k.numel() * 4
    cache.lengths[:] = torch.tensor([4, 5, 6])
    cache.reset([0, 2])
    assert cache.lengths.tolist() == [0, 5, 0]
    cache.reset()
    assert cache.lengths.tolist() == [0, 0, 0]


def test_new_cache_rejects_capacity_beyond_max_seq_len(model):
    with pytest.raises(ValueError, match="capacity"):
        model.new_cache(1, capacity=CONFIG.max_seq_len + 1)


# -- MTP ------------------------------------------------------------------------------------------------


def test_mtp_modules_chain_and_predict_through_the_shared_head(model, tokens):
    with torch.no_grad():
        _, hidden = model(tokens[:, :10])
        logits0, hidden0 = model.mtp_forward(0, hidden, tokens[:, 1:11])
        logits1, hidden1 = model.mtp_forward(1, hidden0, tokens[:, 2:12])
    assert logits0.shape == logits1.shape == (3, 10, CONFIG.vocab_size)
    assert hidden0.shape == hidden1.shape == (3, 10, CONFIG.d_model)
    torch.testing.assert_close(logits1, model.head(model.norm(hidden1)))


def test_cached_mtp_forward_equals_uncached(model, tokens):
    with torch.no_grad():
        _, hidden = model(tokens[:, :10])
        full0, full_h0 = model.mtp_forward(0, hidden, tokens[:, 1:11])
        full1, _ = model.mtp_forward(1, full_h0, tokens[:, 2:12])
        cache = model.new_mtp_cache(3, capacity=16)
        pieces0, pieces1 = [], []
        for start, size in ((0, 4), (4, 1), (5, 5)):
            span = slice(start, start + size)
            # Both modules cover the same positions; only the last call advances the shared lengths.
            logits0, h0 = model.mtp_forward(0, hidden[:, span], tokens[:, 1:11][:, span], cache, n_new=[0, 0, 0])
            logits1, _ = model.mtp_forward(1, h0, tokens[:, 2:12][:, span], cache)
            pieces0.append(logits0)
            pieces1.append(logits1)
    torch.testing.assert_close(torch.cat(pieces0, 1), full0, atol=ATOL, rtol=0)
    torch.testing.assert_close(torch.cat(pieces1, 1), full1, atol=ATOL, rtol=0)
    assert cache.lengths.tolist() == [10, 10, 10]


def test_mtp_forward_rejects_bad_arguments(model, tokens):
    hidden = torch.zeros(3, 12, CONFIG.d_model)
    with pytest.raises(ValueError, match="MTP module index"):
        model.mtp_forward(CONFIG.n_mtp, hidden, tokens)
    with pytest.raises(ValueError, match="hidden"):
        model.mtp_forward(0, hidden[:, :5], tokens)


def test_plain_model_has_no_mtp_cache():
    plain = CausalLM(ModelConfig(vocab_size=40, d_model=16, n_layers=1, n_heads=2, d_ff=32, max_seq_len=8))
    assert len(plain.mtp) == 0
    with pytest.raises(ValueError, match="no MTP"):
        plain.new_mtp_cache(1)
