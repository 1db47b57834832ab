"""A page's prefill on the real model reads its K/V out of the process's one engine: they equal the model's own
CacheAttention pass, every engine block is free afterwards, a cached prompt is still computed in full, and
the edit proof's two prefills are recomputed (no prefix-cache read), so its prefix identity is shown, not given."""

from __future__ import annotations

import weakref

import pytest
import torch

import kvviz.engine.weights as weights_module
from kvviz.engine import EngineConfig, EngineLoop, LLMEngine, RequestOutput, SamplingParams, get_engine_loop
from kvviz.engine.loop import CAPTURE_CLIENT
from kvviz.engine.prefill import engine_loop_for, prefill, prefill_alone
from kvviz.experiments.edit.inputs import edit_inputs
from kvviz.experiments.edit.report import run_reuse_experiment
from kvviz.model import load_model, tokenize
from kvviz.model.prefill import KV_FROM_ENGINE, KV_FROM_MODEL

pytestmark = pytest.mark.model

TEXT = "Blocks of sixteen tokens hold the keys and values of a prompt; the last block is often partial. " * 3
PACKED_REL = 1e-5  # oneDNN-packed products against F.linear (kvviz.engine.weights: about 1e-6 relative)


@pytest.fixture(scope="module")
def lm():
    return load_model()


@pytest.fixture(scope="module")
def loop(lm):
    loop = get_engine_loop()
    assert loop.engine.lm is lm
    return loop


@pytest.fixture(scope="module")
def ids(lm, loop):
    ids = tokenize(TEXT).ids
    bs = loop.engine.block_size
    assert len(ids) > 3 * bs and len(ids) % bs  # several full blocks and a partial one
    return ids


def max_abs(a: list[torch.Tensor], b: list[torch.Tensor]) -> float:
    return max((x.float() - y.float()).abs().max().item() for x, y in zip(a, b, strict=True))


def all_blocks_free(engine: LLMEngine) -> bool:
    return all(b.ref_cnt == 0 for b in engine.pool.blocks) and engine.pool.get_num_free_blocks() == engine.num_blocks - 1


@pytest.fixture
def captures(loop, monkeypatch) -> list[RequestOutput]:
    """Every K/V capture the engine loop serves during the test (its final outputs)."""
    seen: list[RequestOutput] = []
    one, alone = loop.capture_kv, loop.capture_kv_alone

    def spy_one(*args, **kwargs) -> RequestOutput:
        seen.append(one(*args, **kwargs))
        return seen[-1]

    def spy_alone(*args, **kwargs) -> list[RequestOutput] | None:
        outs = alone(*args, **kwargs)
        seen.extend(outs or [])
        return outs

    monkeypatch.setattr(loop, "capture_kv", spy_one)
    monkeypatch.setattr(loop, "capture_kv_alone", spy_alone)
    return seen


def test_engine_capture_equals_the_models_own_pass(lm, loop, ids):
    on_engine = prefill(lm, token_ids=ids)
    own = prefill(lm, token_ids=ids, use_engine=False)
    assert (on_engine.kv_source, own.kv_source) == (KV_FROM_ENGINE, KV_FROM_MODEL)
    assert on_engine.token_ids == own.token_ids and on_engine.kv_bytes_measured == own.kv_bytes_measured
    for got, want in zip(on_engine.keys + on_engine.values, own.keys + own.values, strict=True):
        assert got.shape == want.shape and got.dtype == want.dtype == lm.torch_dtype
        assert (got - want).abs().max().item() <= PACKED_REL * want.abs().max().item()
    assert (on_engine.last_logits - own.last_logits).abs().max().item() <= PACKED_REL * own.last_logits.abs().max().item()
    assert on_engine.prefill_ms > 0 and on_engine.reused_tokens == 0
    assert loop.wait_idle(30) and loop.read(all_blocks_free)


def test_the_engine_multiplying_the_models_own_weights_gives_the_same_kv_within_1e_5(lm, ids, monkeypatch):
    """The engine's blocks hold the decoder's own numbers: with the weights as the model keeps them (no
    oneDNN packing) and torch's SDPA (not the compiled kernel, whose other summation order moves the last
    layers' K by ~2e-5 of values up to ~20) the capture equals the CacheAttention pass within 1e-5 in fp32. The
    logits within 1e-5 relative: the engine's last layer multiplies only the sampled row (the model's pass all
    of them), and a product of fewer rows may sum in another order (2e-5 of logits up to ~20)."""
    if lm.torch_dtype != torch.float32:
        pytest.skip("the 1e-5 bound is for fp32")
    monkeypatch.setattr(weights_module, "can_pack", lambda device, dtype: False)
    monkeypatch.setenv("KVVIZ_ATTENTION_KERNEL", "0")
    monkeypatch.setattr(weights_module, "_PACKED", weakref.WeakKeyDictionary())  # restored after the test
    side = EngineLoop(LLMEngine(lm, EngineConfig(kv_cache_bytes=32 << 20)))
    try:
        out = side.capture_kv(ids)
        assert side.wait_idle(30) and side.read(all_blocks_free)
    finally:
        side.close()
    own = prefill(lm, token_ids=ids, use_engine=False)
    assert out.kv is not None and out.kv.num_tokens == len(ids)
    assert len(out.kv.block_ids) == -(-len(ids) // side.engine.block_size)
    assert max_abs(out.kv.keys, own.keys) <= 1e-5 and max_abs(out.kv.values, own.values) <= 1e-5
    assert (out.logits - own.last_logits).abs().max().item() <= PACKED_REL * own.last_logits.abs().max().item()


def test_a_cached_prompt_is_still_computed_in_full(lm, loop, ids, captures):
    loop.submit("cached-first", list(ids), SamplingParams(max_tokens=1)).result()  # its full blocks are cached
    result = prefill(lm, token_ids=ids)
    assert result.kv_source == KV_FROM_ENGINE
    assert [c.num_cached_tokens for c in captures] == [0]
    assert loop.read(lambda e: (e.recent_hits[-1][1], e.recent_hits[-1][3])) == (CAPTURE_CLIENT, 0)
    later = loop.submit("cached-later", list(ids), SamplingParams(max_tokens=1)).result()
    assert later.num_cached_tokens > 0  # the cache still serves an ordinary request
    assert loop.wait_idle(30) and loop.read(all_blocks_free)


def test_the_engine_is_left_out_for_a_prompt_it_cannot_hold(lm, loop):
    assert engine_loop_for(lm, loop.engine.max_model_len - 1) is loop
    assert engine_loop_for(lm, loop.engine.max_model_len) is None


def test_the_edit_proof_recomputes_both_prompts(lm, loop, captures):
    """A tail edit: B's capture caches blocks that A's capture would hit; both are computed in full."""
    a = "Every block of a prompt is hashed with its parent, so a change reaches every later block. " * 2
    b = a[:-2] + "!"
    x = run_reuse_experiment(lm, edit_inputs(a, b, 16))
    assert len(captures) >= 2 and {c.num_cached_tokens for c in captures} == {0}
    proof = x.proof
    assert proof.prefix_identical and proof.first_changed_token is not None
    assert x.edit.comparison.reused_tokens >= 16  # A's blocks were there to be read, had the proof read them


def bit_equal(a, b) -> bool:
    return all(torch.equal(x, y) for x, y in zip(a.keys + a.values, b.keys + b.values, strict=True))


def test_prefills_alone_are_bit_equal_whatever_else_the_engine_serves(lm, loop, ids):
    """A capture batched with another prompt can differ in the last bits (other rows, other chunks);
    captures alone do not, and when the engine stays busy all of them run on the model's own pass."""
    first, second = prefill_alone(lm, [ids, ids])
    assert (first.kv_source, second.kv_source) == (KV_FROM_ENGINE, KV_FROM_ENGINE) and bit_equal(first, second)
    busy = loop.submit("busy-a", list(range(1000, 1400)), SamplingParams(max_tokens=2, ignore_eos=True))
    waited = prefill_alone(lm, [ids], quiet_timeout_s=120)[0]  # waits for the short request, then runs alone
    busy.result()
    assert waited.kv_source == KV_FROM_ENGINE and bit_equal(waited, first)
    long = loop.submit("busy-b", [5, 6, 7], SamplingParams(max_tokens=400, ignore_eos=True))
    try:
        both = prefill_alone(lm, [ids, ids], quiet_timeout_s=0.3)
    finally:
        long.abort()
    assert {r.kv_source for r in both} == {KV_FROM_MODEL} and bit_equal(*both)
    assert loop.wait_idle(60) and loop.read(all_blocks_free)
