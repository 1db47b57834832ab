"""The host tier (--kv-offloading-size) on a tiny random Llama (fast lane): a prefix evicted from the device
pool but kept in the host tier is copied back, not recomputed (same greedy tokens, the copied K/V equal a
fresh prefill), hits are counted by source, the tier's KV events say medium CPU, its LRU keeps a request's
head longest, and random operation sequences with tiny pools keep both tiers' invariants."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_llm import VOCAB, greedy_reference, tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.engine.offload import HostBlockPool, StoreMeta
from kvviz.errors import CodedError
from kvviz.mirror.kv_events import MEDIUM_CPU, BlockRemoved, BlockStored

BS = 4
TOKEN_BYTES = 2 * 2 * 2 * 8 * 4  # K and V x 2 layers x 2 kv heads x head_dim 8 x fp32
GIB = 1 << 30


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def engine_with(lm, blocks: int, host_blocks: int, budget: int = 64, **kw) -> LLMEngine:
    return LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=blocks * BS * TOKEN_BYTES,
                                      max_num_batched_tokens=budget,
                                      kv_offloading_size=host_blocks * BS * TOKEN_BYTES / GIB, **kw))


def run_one(engine: LLMEngine, rid: str, ids: list[int], n: int = 3):
    engine.add_request(rid, ids, SamplingParams(max_tokens=n, ignore_eos=True))
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                return out
    raise AssertionError("no output")


def fresh_keys(lm, prefix: list[int], layer: int, positions: slice) -> torch.Tensor:
    """K of ``positions`` of a fresh prefill of ``prefix``: ``[n, kv_heads, head_dim]``."""
    with torch.inference_mode():
        cache = lm.model(input_ids=torch.tensor([prefix]), use_cache=True).past_key_values
    return cache.layers[layer].keys[0, :, positions].transpose(0, 1)


def test_evicted_prefix_is_copied_back_from_the_host_tier(lm):
    engine = engine_with(lm, blocks=8, host_blocks=32)
    batches = []
    engine.subscribe_kv_events(batches.append)
    a = [random.Random(1).randrange(1, VOCAB) for _ in range(17)]
    first = run_one(engine, "a", a)
    assert first.cached_tokens_by_source == {"device": 0, "host": 0}
    for i, rid in enumerate(("b", "c")):  # two other prompts push a's blocks out of the 7-block device pool
        run_one(engine, rid, [random.Random(10 + i).randrange(1, VOCAB) for _ in range(17)])
    hashes = engine.manager.request_block_hashes(a)
    assert not any(engine.pool.get_cached_block(h) for h in hashes)
    assert engine.host.pool.lookup(hashes) == 4
    again = run_one(engine, "a2", a)
    assert again.token_ids == first.token_ids == greedy_reference(lm, a, 3)
    assert again.num_cached_tokens == 16 and again.cached_tokens_by_source == {"device": 0, "host": 16}
    step = next(s for s in engine.steps if any(i.request_id == "a2" for i in s.items))
    assert [(i.start, i.num_tokens) for i in step.items] == [(16, 1)]  # only the last prompt token computed
    for j, h in enumerate(hashes):  # the copied blocks hold what a fresh prefill computes
        (bid,) = engine.pool.cached_block_hash_to_block[h]
        k, _v, _tokens = engine.kv_of_block(bid)
        for layer in range(2):
            fresh = fresh_keys(lm, a[:(j + 1) * BS], layer, slice(j * BS, (j + 1) * BS))
            assert (k[layer] - fresh).abs().max().item() <= 1e-5
    s = engine.stats()
    assert (s.prefix_cache_hits, s.prefix_cache_hits_host, s.prompt_tokens_cached_host_total) == (0, 16, 16)
    assert s.external_prefix_cache_hits == 16 and s.prompt_tokens_cached_total == 16
    host_events = [e for b in batches for e in b.events if getattr(e, "medium", None) == MEDIUM_CPU]
    stored = [e for e in host_events if isinstance(e, BlockStored)][:4]  # one per block, each with its parent
    assert [e.block_hashes for e in stored] == [[h] for h in hashes]
    assert [e.parent_block_hash for e in stored] == [None, *hashes[:3]]
    assert [e.token_ids for e in stored] == [a[i:i + BS] for i in range(0, 16, BS)] and stored[0].block_size == BS


def test_without_the_setting_there_is_no_host_tier(lm):
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=8 * BS * TOKEN_BYTES))
    assert engine.host is None and engine.scheduler.host is None
    out = run_one(engine, "a", list(range(1, 18)))
    assert out.cached_tokens_by_source == {"device": 0, "host": 0}
    assert engine.stats().external_prefix_cache_queries == 0


@pytest.mark.parametrize("size", [0, -1.0, float("nan"), True, "1", 2048])
def test_bad_offloading_size_is_a_coded_error(size):
    with pytest.raises(CodedError) as err:
        EngineConfig(kv_offloading_size=size)
    assert err.value.code == "bad_engine_setting"


def test_a_size_below_one_block_is_refused(lm):
    with pytest.raises(CodedError, match="holds no block"):
        engine_with(lm, blocks=8, host_blocks=0.5)  # type: ignore[arg-type]


def _meta(i: int) -> StoreMeta:
    return StoreMeta(None, (i,))


def test_host_pool_evicts_least_recent_tail_first_and_skips_a_store_it_cannot_place():
    pool = HostBlockPool(3, 1)
    assert [h for h, _ in pool.prepare_store([b"a", b"b", b"c"], [_meta(i) for i in range(3)])] == [b"a", b"b", b"c"]
    pool.complete_store([b"a", b"b", b"c"])
    assert list(pool.blocks) == [b"c", b"b", b"a"]  # the request's head is the most recent
    pool.prepare_store([b"d"], [_meta(3)])
    pool.complete_store([b"d"])
    assert b"c" not in pool.blocks and pool.lookup([b"a", b"b"]) == 2
    removed = [e for e in pool.take_events() if isinstance(e, BlockRemoved)]
    assert removed[0].block_hashes == [b"c"] and removed[0].medium == MEDIUM_CPU
    slots = pool.prepare_load([b"a", b"b", b"d"])  # every block pinned: nothing can be evicted
    assert len(set(slots)) == 3
    assert pool.prepare_store([b"e"], [_meta(4)]) is None and pool.num_skipped_stores == 1
    pool.complete_load([b"a", b"b", b"d"])
    pool.check_invariants()
    assert pool.lookup([b"x", b"a"]) == 0  # a run starts at the first block


OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "step", "step", "abort"]),
                         st.integers(0, 7), st.integers(1, 20), st.integers(1, 9)), min_size=5, max_size=40)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, blocks=st.integers(6, 14), host_blocks=st.integers(1, 12), budget=st.integers(3, 12),
       seed=st.integers(0, 3))
def test_random_operations_keep_both_tiers_invariants(lm, ops, blocks, host_blocks, budget, seed):
    engine = engine_with(lm, blocks, host_blocks, budget=budget, max_num_seqs=4)
    batches = []
    engine.subscribe_kv_events(batches.append)
    rng = random.Random(seed)
    shared = [rng.randrange(1, VOCAB) for _ in range(10)]
    live: dict[str, tuple[list[int], int]] = {}
    done = {}
    n = 0
    for op, who, length, new in ops:
        if op == "add":
            ids = (shared[: who + 2] + [rng.randrange(1, VOCAB) for _ in range(length)])[: (blocks - 2) * BS - 1]
            rid = f"q{n}"
            n += 1
            engine.add_request(rid, ids, SamplingParams(max_tokens=new, ignore_eos=True))
            live[rid] = (ids, new)
        elif op == "abort" and live:
            rid = sorted(live)[who % len(live)]
            engine.abort_request(rid)
            live.pop(rid)
        else:
            for out in engine.step():
                if out.finished and out.request_id in live:
                    done[out.request_id] = (out, *live.pop(out.request_id))
        engine.pool.check_invariants()
        engine.host.pool.check_invariants()
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished and out.request_id in live:
                done[out.request_id] = (out, *live.pop(out.request_id))
        engine.host.pool.check_invariants()
    assert engine.pool.get_num_free_blocks() == engine.num_blocks - 1
    assert all(b.ref_cnt == 0 for b in engine.pool.blocks)
    assert not engine.host.next_store
    for out, ids, new in done.values():  # copies back from the host change no token (max_model_len may cut)
        assert out.token_ids and out.token_ids == greedy_reference(lm, ids, new)[:len(out.token_ids)]
        assert 0 <= out.num_cached_tokens_host <= out.num_cached_tokens
    _check_host_blocks(lm, engine, batches)


def _check_host_blocks(lm, engine: LLMEngine, batches) -> None:
    """Every host block holds the K/V a fresh prefill of its prefix computes (prefixes from BlockStored)."""
    parent_of, tokens_of = {}, {}
    for batch in batches:
        for e in batch.events:
            if isinstance(e, BlockStored):
                parent = e.parent_block_hash
                for j, h in enumerate(e.block_hashes):
                    parent_of[h], tokens_of[h], parent = parent, e.token_ids[j * BS:(j + 1) * BS], h
    host = engine.host
    for h, block in host.pool.blocks.items():
        chain, cur = [], h
        while cur is not None:
            chain.append(tokens_of[cur])
            cur = parent_of[cur]
        prefix = [t for part in reversed(chain) for t in part]
        k, _v = host.read([block.slot])
        fresh = fresh_keys(lm, prefix, 1, slice(len(prefix) - BS, len(prefix)))
        assert (k[1, 0] - fresh).abs().max().item() <= 1e-4


def test_a_readmission_after_preemption_is_not_counted_as_a_connector_lookup():
    from kvviz.engine.scheduler import PrefixCacheCounters

    counters = PrefixCacheCounters()
    counters.record_external(12, 8, preempted=False)
    counters.record_external(12, 8, preempted=True)  # vLLM's PrefixCacheStats.record returns for these
    assert (counters.external_queries, counters.external_hits, counters.host_hits) == (12, 8, 8)
