"""Prefill with KV capture, prefix continuation, input limits and Unicode, on the real model."""

from __future__ import annotations

import re
import threading

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.model import InputError, load_model, load_tokenizer, prefill, prefill_continue, tokenize
from kvviz.util.blank import is_blank

pytestmark = pytest.mark.model

TEXT = "The cache keeps keys and values, never the text."
_BYTES = re.compile(r"^(<0x[0-9A-F]{2}>)+$")


@pytest.fixture(scope="module")
def lm():
    return load_model()


@pytest.fixture(scope="module")
def full(lm):
    return prefill(lm, text=TEXT)


def test_measured_kv_bytes_equal_the_formula_exactly(lm, full):
    info = lm.info
    n = full.num_tokens
    assert n == len(full.token_ids) == len(full.pieces) > 5
    assert len(full.keys) == len(full.values) == info.num_layers
    for k, v in zip(full.keys, full.values, strict=True):
        assert tuple(k.shape) == tuple(v.shape) == (info.num_kv_heads, n, info.head_dim)
        assert not k.requires_grad and k.dtype == lm.torch_dtype
    element = full.keys[0].element_size()
    assert full.kv_bytes_measured == 2 * info.num_layers * info.num_kv_heads * info.head_dim * element * n
    assert full.kv_bytes_per_token == 2 * 30 * 3 * 64 * element
    assert full.last_logits.shape == (info.vocab_size,) and full.last_logits.dtype == torch.float32
    assert full.last_logits.device.type == "cpu"
    assert full.prefill_ms > 0 and full.device == info.device and full.dtype == info.dtype
    assert not full.truncated and full.notice is None and full.reused_tokens == 0


def test_kv_are_real_and_distinct(full):
    # K differ across layers and tokens; V is not K: a real capture, not a placeholder
    assert not torch.equal(full.keys[0], full.keys[1])
    assert not torch.equal(full.keys[0], full.values[0])
    assert full.keys[5][:, 0].abs().sum() > 0
    assert torch.isfinite(full.last_logits).all()


@pytest.mark.parametrize("fraction", [0.0, 0.1, 0.5, 1.0])
def test_continuation_matches_full_prefill(lm, full, fraction):
    n = full.num_tokens
    p = min(int(n * fraction), n - 1)
    prefix_k = [k[:, :p] for k in full.keys]
    prefix_v = [v[:, :p] for v in full.values]
    before = [k.clone() for k in prefix_k]
    out = prefill_continue(lm, prefix_k, prefix_v, full.token_ids)
    assert out.reused_tokens == p and out.computed_tokens == n - p and out.num_tokens == n
    assert (out.last_logits - full.last_logits).abs().max().item() < 1e-3
    for a, b in zip(out.keys, full.keys, strict=True):
        assert a.shape == b.shape
        assert (a - b).abs().max().item() < 1e-3
    assert out.kv_bytes_measured == full.kv_bytes_measured
    assert all(torch.equal(a, b) for a, b in zip(before, prefix_k, strict=True))  # caller's tensors untouched


def test_continuation_from_a_different_prompts_kv_changes_the_result(lm, full):
    """The 'wrong reuse' demo: K/V of a prefix that differs in one early token give other logits."""
    other = prefill(lm, text=TEXT.replace("The", "A", 1))
    assert other.token_ids[0] != full.token_ids[0] and other.token_ids[1:] == full.token_ids[1:]
    p = full.num_tokens - 2
    wrong = prefill_continue(lm, [k[:, :p] for k in other.keys], [v[:, :p] for v in other.values], full.token_ids)
    right = prefill_continue(lm, [k[:, :p] for k in full.keys], [v[:, :p] for v in full.values], full.token_ids)
    assert (right.last_logits - full.last_logits).abs().max().item() < 1e-3
    assert (wrong.last_logits - full.last_logits).abs().max().item() > 0.1


def test_continuation_rejects_bad_prefixes(lm, full):
    n = full.num_tokens
    ks, vs = full.keys, full.values
    with pytest.raises(InputError, match="at least the last token"):
        prefill_continue(lm, ks, vs, full.token_ids)
    with pytest.raises(InputError, match="at least the last token"):
        prefill_continue(lm, [k[:, :3] for k in ks], [v[:, :3] for v in vs], full.token_ids[:3])
    with pytest.raises(InputError, match="one tensor per layer"):
        prefill_continue(lm, ks[:-1], vs[:-1], full.token_ids + [42])
    with pytest.raises(InputError, match="expected"):
        prefill_continue(lm, [k[:2, :3] for k in ks], [v[:2, :3] for v in vs], full.token_ids)
    mixed_k, mixed_v = [k[:, :3] for k in ks], [v[:, :3] for v in vs]
    mixed_k[4], mixed_v[4] = ks[4][:, :2], vs[4][:, :2]
    with pytest.raises(InputError, match="disagree"):
        prefill_continue(lm, mixed_k, mixed_v, full.token_ids)
    with pytest.raises(InputError):
        prefill_continue(lm, [k[:, :3] for k in ks], [v[:, :3] for v in vs], [])
    assert n == full.num_tokens


def test_bad_inputs_are_input_errors(lm):
    for text in ("", "   ", "\n\t \u00a0\u3000"):
        with pytest.raises(InputError, match="empty"):
            prefill(lm, text=text)
        with pytest.raises(ValueError):
            tokenize(text)
    for bad in (None, 12, b"bytes"):
        with pytest.raises(InputError):
            tokenize(bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="exactly one"):
        prefill(lm)
    with pytest.raises(InputError, match="exactly one"):
        prefill(lm, text="a", token_ids=[1])
    with pytest.raises(InputError, match="not in the vocabulary"):
        prefill(lm, token_ids=[1, 10**9])
    with pytest.raises(InputError, match="not in the vocabulary"):
        prefill(lm, token_ids=[1, -1])
    with pytest.raises(InputError):
        prefill(lm, token_ids=[])
    for limit in (0, -5, 10**9, True, 2.5):
        with pytest.raises(InputError, match="max_tokens"):
            tokenize("hello", max_tokens=limit)  # type: ignore[arg-type]


def test_long_text_is_truncated_with_a_notice(lm):
    text = "one two three four five six seven eight nine ten " * 20
    tok = tokenize(text, max_tokens=16)
    assert tok.truncated and len(tok.ids) == 16 and tok.num_tokens_before_truncation > 100
    assert "16" in tok.notice and f"{tok.num_tokens_before_truncation:,}" in tok.notice
    result = prefill(lm, text=text, max_tokens=16)
    assert result.num_tokens == 16 and result.keys[0].shape[1] == 16 and result.truncated
    assert result.notice == tok.notice
    assert tokenize(text).truncated is False  # default limit 2,048


def test_default_limit_is_2048(monkeypatch):
    tok = tokenize("word " * 2100)
    assert tok.truncated and len(tok.ids) == 2048
    monkeypatch.setenv("KVVIZ_MAX_TOKENS", "100")
    assert len(tokenize("word " * 2100).ids) == 100


def _visible(pieces: list[str]) -> str:
    return "".join(p for p in pieces if not _BYTES.match(p))


def test_any_unicode_tokenizes_to_readable_pieces(lm):
    text = "Привет, мир! 😀👍🏽 שלום עולם مرحبا 你好世界 e\u0301 \x00\x07\x1b[0m\ttab\nnew"
    tok = tokenize(text)
    assert len(tok.pieces) == len(tok.ids)
    assert _visible(tok.pieces) == text
    assert "Привет" in "".join(tok.pieces) and "😀" in "".join(tok.pieces)
    result = prefill(lm, text=text)
    assert result.num_tokens == len(tok.ids) and torch.isfinite(result.last_logits).all()
    # lone surrogates (possible in Python str) are replaced, not crashed on
    assert tokenize("abc\ud800def").num_tokens > 0


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
# Non-blank by the project's one rule (kvviz.util.blank.is_blank: control and zero-width characters are as
# blank as spaces, so e.g. "\x1b" alone is rejected by tokenize), not by str.strip().
@given(st.text(min_size=1, max_size=40).filter(lambda s: not is_blank(s)))
def test_pieces_reassemble_what_the_model_sees(text):
    """Pieces spell exactly the decoded token ids (the text itself, unless the vocabulary lacks a byte)."""
    tok = tokenize(text)
    assert len(tok.pieces) == len(tok.ids) >= 1
    assert _visible(tok.pieces) == load_tokenizer().decode(tok.ids)


def test_concurrent_prefills_are_serialised_and_correct(lm):
    texts = [f"Request number {i} shares nothing." for i in range(4)]
    expected = [prefill(lm, text=t).last_logits for t in texts]
    got: dict[int, torch.Tensor] = {}

    def work(i: int) -> None:
        got[i] = prefill(lm, text=texts[i]).last_logits

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        assert (got[i] - expected[i]).abs().max().item() < 1e-4


def test_concurrent_tokenize_is_safe():
    texts = [("word " * (i + 1)) + f"#{i} 😀" for i in range(8)]
    expected = [tokenize(t, max_tokens=4 + i).ids for i, t in enumerate(texts)]
    got: dict[int, list[int]] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(20):
                got[i] = tokenize(texts[i], max_tokens=4 + i).ids
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert [got[i] for i in range(8)] == expected


def test_huge_paste_is_cut_with_an_honest_notice():
    tok = tokenize("x y " * 300_001)  # 1.2 M characters: only the first 1 M are tokenized
    assert tok.truncated and len(tok.ids) == 2048
    assert tok.notice.startswith("The input has more than ")
