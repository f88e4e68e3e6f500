import pytest

from autotune.engines.embedded.tokenizer import ByteTokenizer


@pytest.fixture
def tokenizer() -> ByteTokenizer:
    return ByteTokenizer()


def test_special_ids_follow_the_bytes_and_fit_the_vocabulary(tokenizer):
    specials = {tokenizer.bos_id, tokenizer.eos_id, tokenizer.pad_id}
    assert len(specials) == 3
    assert min(specials) == 256
    assert max(specials) < tokenizer.vocab_size


@pytest.mark.parametrize("text", ["", "def f(x):\n    return x + 1\n", "caffè ☕ 数据"])
def test_encode_decode_round_trips(tokenizer, text):
    ids = tokenizer.encode(text)
    assert ids[0] == tokenizer.bos_id
    assert ids[1:] == list(text.encode("utf-8"))
    assert tokenizer.decode(ids) == text


def test_encode_without_bos_is_the_raw_bytes(tokenizer):
    assert tokenizer.encode("ab", add_bos=False) == [97, 98]


def test_decode_skips_special_ids(tokenizer):
    ids = [tokenizer.bos_id, 104, tokenizer.pad_id, 105, tokenizer.eos_id]
    assert tokenizer.decode(ids) == "hi"


def test_decode_replaces_invalid_utf8(tokenizer):
    assert tokenizer.decode([0xE2, 0x98]) == "\ufffd"


def test_decode_rejects_ids_outside_the_vocabulary(tokenizer):
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.decode([tokenizer.vocab_size])
    with pytest.raises(ValueError, match="outside the vocabulary"):
        tokenizer.decode([-1])


def test_encode_rejects_non_text(tokenizer):
    with pytest.raises(TypeError):
        tokenizer.encode(b"bytes")
