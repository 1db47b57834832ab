"""K/V capture on a tiny random Llama (fast lane): a request's K/V read out of its blocks equal the plain
decoder's own cache, also when its prefill is chunked and batched with another request; every block is
free afterwards; ``skip_reading_prefix_cache`` recomputes a cached prompt and is not counted as a query."""

from __future__ import annotations

import pytest
import torch
from tiny_llm import TINY_BS, TINY_TOKEN_BYTES, drain, engine_with, tiny_lm

from kvviz.engine import EngineLoop, LLMEngine, SamplingParams
from kvviz.engine.capture import read_request_kv
from kvviz.errors import CodedError

BS = TINY_BS
TOKEN_BYTES = TINY_TOKEN_BYTES
PROMPT = [(7 * i + 3) % 60 + 1 for i in range(5 * BS + 3)]  # five full blocks and a partial one
CAPTURE = SamplingParams(max_tokens=1, return_logits=True)
TOL = 1e-5


def close_logits(got, want) -> bool:
    """Within 1e-5 of the logits' scale: the engine's packed products and fused norm, activation and rotary
    round differently from the decoder's own ops (the K/V above hold to 1e-5 absolute)."""
    return (got - want).abs().max().item() <= TOL * want.abs().max().item()


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def model_capture(lm, ids: list[int]) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor]:
    """The plain decoder's own pass over its KVCache (CacheAttention): K, V ``[kv_heads, n, d]`` per layer, last logits."""
    cache = lm.model.new_cache()
    with torch.inference_mode():
        out = lm.model(input_ids=torch.tensor([ids]), past_key_values=cache, use_cache=True, logits_to_keep=1)
    return ([la.keys[0] for la in cache.layers], [la.values[0] for la in cache.layers], out.logits[0, -1])


def assert_close(got: list[torch.Tensor], want: list[torch.Tensor]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.shape == w.shape and g.dtype == w.dtype and g.device.type == "cpu"
        assert (g - w).abs().max().item() <= TOL


def all_free(engine: LLMEngine) -> bool:
    return (all(b.ref_cnt == 0 for b in engine.pool.blocks)
            and engine.pool.get_num_free_blocks() == engine.num_blocks - 1)


def test_captured_kv_equal_the_decoders_own_cache_and_every_block_is_free_after(lm):
    engine = engine_with(lm)
    engine.add_request("c", PROMPT, CAPTURE, capture_kv=True)
    out = drain(engine)["c"]
    keys, values, logits = model_capture(lm, PROMPT)
    kv = out.kv
    assert kv is not None and kv.num_tokens == len(PROMPT) and len(kv.block_ids) == 6  # 5 full + 1 partial
    assert kv.keys[0].shape == (2, len(PROMPT), 8)
    assert_close(kv.keys, keys)
    assert_close(kv.values, values)
    assert close_logits(out.logits, logits)
    assert all_free(engine)
    engine.pool.check_invariants()
    # the blocks were freed, not wiped: what the capture read is still in them, and it is a copy
    again = read_request_kv(engine.memory, list(kv.block_ids), len(PROMPT))
    assert all(torch.equal(a, b) for a, b in zip(again.keys, kv.keys, strict=True))
    assert kv.keys[0].data_ptr() != again.keys[0].data_ptr()


def test_a_chunked_capture_batched_with_another_request_is_the_same(lm):
    engine = engine_with(lm, budget=6)  # 23 tokens in chunks, sharing steps with a decoding request
    engine.add_request("other", [5, 9, 11, 2, 8], SamplingParams(max_tokens=12, ignore_eos=True))
    engine.step()
    engine.add_request("c", PROMPT, CAPTURE, capture_kv=True)
    done = drain(engine)
    keys, values, logits = model_capture(lm, PROMPT)
    assert max(r.num_requests for r in engine.steps) == 2
    assert_close(done["c"].kv.keys, keys)
    assert_close(done["c"].kv.values, values)
    assert close_logits(done["c"].logits, logits)
    assert done["other"].kv is None  # only a request added with capture_kv carries K/V
    assert all_free(engine)


def test_skip_reading_prefix_cache_recomputes_and_is_not_counted(lm):
    engine = engine_with(lm)
    engine.add_request("a", PROMPT, SamplingParams(max_tokens=1))
    drain(engine)
    queries = engine.stats().prefix_cache_queries
    engine.add_request("skip", PROMPT, SamplingParams(max_tokens=1, return_logits=True, skip_reading_prefix_cache=True),
                       capture_kv=True)
    engine.add_request("read", PROMPT, SamplingParams(max_tokens=1, return_logits=True), capture_kv=True)
    done = drain(engine)
    assert done["skip"].num_cached_tokens == 0
    assert done["read"].num_cached_tokens == 5 * BS  # the same prompt read from the cache
    assert engine.stats().prefix_cache_queries == queries + len(PROMPT)  # "read" only, as vLLM counts
    assert_close(done["skip"].kv.keys, done["read"].kv.keys)
    assert all_free(engine)
    with pytest.raises(CodedError, match="skip_reading_prefix_cache"):
        SamplingParams(skip_reading_prefix_cache="yes")  # type: ignore[arg-type]


def test_the_loop_captures_while_it_serves_and_leaves_no_block_held(lm):
    loop = EngineLoop(engine_with(lm, budget=8))
    try:
        stream = loop.submit("other", [3, 4, 5, 6, 7, 8], SamplingParams(max_tokens=20, ignore_eos=True))
        out = loop.capture_kv(PROMPT)
        stream.result()
        assert loop.wait_idle(10)
        keys, values, logits = model_capture(lm, PROMPT)
        assert out.num_cached_tokens == 0 and out.kv is not None
        assert_close(out.kv.keys, keys)
        assert_close(out.kv.values, values)
        assert close_logits(out.logits, logits)
        assert loop.read(all_free)
        assert ("kv capture", 0) in loop.read(lambda e: [(h[1], h[3]) for h in e.recent_hits])
    finally:
        loop.close()


def test_captures_alone_wait_for_a_quiet_engine_or_give_up(lm):
    loop = EngineLoop(engine_with(lm, blocks=1100, budget=8))  # room for a 4,000-token generation
    try:
        outs = loop.capture_kv_alone([PROMPT, PROMPT[:9]], timeout_s=5)
        assert outs is not None and [o.kv.num_tokens for o in outs] == [len(PROMPT), 9]
        keys, _, logits = model_capture(lm, PROMPT)
        assert_close(outs[0].kv.keys, keys)
        assert all(o.num_cached_tokens == 0 for o in outs)  # the second is PROMPT's prefix: computed again
        steps = loop.read(lambda e: [s.items for s in e.steps[-5:]])  # 23 tokens in 3 chunks, then 9 in 2
        assert all(len(items) == 1 and items[0].client == "kv capture" for items in steps)
        stream = loop.submit("long", [3, 4, 5], SamplingParams(max_tokens=4000, ignore_eos=True))
        assert loop.capture_kv_alone([PROMPT], timeout_s=0.2) is None  # never quiet: nothing added
        stream.abort()
        assert loop.wait_idle(10) and loop.read(all_free)
    finally:
        loop.close()
