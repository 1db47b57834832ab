"""The live view's two-tier numbers (kvviz.engine.snapshot.TierView) on a tiny random Llama (fast lane): both
pools' held and free blocks, the cached hashes also in host memory, a block's journey counters and each
request's prompt tokens by source, checked against the engine's own pools and outputs."""

from __future__ import annotations

import random

import pytest
from tiny_llm import VOCAB, tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.engine.snapshot import RequestHits, engine_view

BS = 4
TOKEN_BYTES = 2 * 2 * 2 * 8 * 4  # K and V x 2 layers x 2 kv heads x head_dim 8 x fp32
GIB = 1 << 30


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def run_one(engine: LLMEngine, rid: str, ids: list[int]):
    engine.add_request(rid, ids, SamplingParams(max_tokens=3, ignore_eos=True))
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                return out
    raise AssertionError("no output")


def prompt(seed: int) -> list[int]:
    return [random.Random(seed).randrange(1, VOCAB) for _ in range(17)]


def test_no_host_tier_gives_no_tier_view(lm):
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=8 * BS * TOKEN_BYTES))
    run_one(engine, "a", prompt(1))
    assert engine_view(engine).tiers is None


def test_tier_numbers_follow_a_prefix_evicted_to_host_and_loaded_back(lm):
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=8 * BS * TOKEN_BYTES,
                                        kv_offloading_size=32 * BS * TOKEN_BYTES / GIB))
    a = prompt(1)
    run_one(engine, "a", a)
    t = engine_view(engine).tiers
    assert t is not None and (t.device_blocks, t.host_blocks) == (7, 32)
    assert t.stored == t.host_held == t.cached_in_host >= 4 and t.loaded == t.evicted == t.dropped == 0
    for i, rid in enumerate(("b", "c")):  # push a's blocks out of the 7-block device pool
        run_one(engine, rid, prompt(10 + i))
    mid = engine_view(engine).tiers
    assert mid.evicted >= 4 and mid.loaded == 0
    again = run_one(engine, "a2", a)
    assert again.cached_tokens_by_source == {"device": 0, "host": 16}
    t = engine_view(engine).tiers
    hp, blocks = engine.host.pool, engine.pool.blocks[1:]
    cached = [b.block_hash for b in blocks if b.block_hash is not None]
    assert t.loaded == 4 and t.dropped == hp.num_evicted == 0 and t.skipped == 0
    assert t.host_held == len(hp.blocks) and t.host_free == hp.num_free and t.stored == len(hp.blocks)
    assert t.device_cached == len(cached) and t.cached_in_host == sum(h in hp.blocks for h in cached) >= 4
    assert t.device_held + t.device_free == t.device_blocks
    assert t.device_free == sum(1 for b in blocks if b.ref_cnt == 0 and b.block_hash is None)
    assert t.computed == mid.computed == 12  # 4 full blocks per prompt; a2's 4 were loaded, not computed
    assert t.recent[0] == RequestHits("a2", "", 17, 0, 16) and t.recent[0].computed == 1
    assert [r.request_id for r in t.recent] == ["a2", "c", "b", "a"]
    assert all(r.device == r.host == 0 and r.computed == 17 for r in t.recent[1:])
    assert t.both_on_host  # the tiny model runs on the CPU


@pytest.mark.parametrize("policy", ["lru", "arc"])
def test_the_tier_view_names_the_host_tiers_eviction_policy(lm, policy):
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=8 * BS * TOKEN_BYTES,
                                        kv_offloading_size=8 * BS * TOKEN_BYTES / GIB,
                                        kv_offloading_eviction_policy=policy))
    run_one(engine, "a", prompt(1))
    assert engine_view(engine).tiers.policy == policy


@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_live_pages_tier_text_names_arc_when_the_engine_evicts_by_arc(lm, lang):
    from streamlit.testing.v1 import AppTest

    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=8 * BS * TOKEN_BYTES,
                                        kv_offloading_size=8 * BS * TOKEN_BYTES / GIB,
                                        kv_offloading_eviction_policy="arc"))
    run_one(engine, "a", prompt(1))
    t = engine_view(engine).tiers

    def page(t):
        from kvviz_app.engine_view.tiers import tiers_section

        tiers_section(t)

    at = AppTest.from_function(page, kwargs={"t": t}, default_timeout=60)
    at.query_params["lang"] = lang
    at.run()
    assert not at.exception, at.exception
    text = "\n".join(m.value for m in at.markdown)
    assert "ARC" in text and "LRU" not in text, text
