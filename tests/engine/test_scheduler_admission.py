"""The scheduler's admission rule, as vLLM 0.33.0's (``scheduler_reserve_full_isl``, on by default): a waiting
or preempted request is admitted only if blocks for its whole current sequence (prompt and the tokens it
already generated), less its prefix hit, fit in the free blocks, not just blocks for its first chunk.
Fast lane: the scheduler alone over the mirror's manager, and the engine on a tiny random Llama."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_llm import VOCAB, tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, Request, RequestStatus, SamplingParams
from kvviz.engine.scheduler import Scheduler
from kvviz.errors import CodedError
from kvviz.mirror.manager import KVCacheManager

BS = 4
TOKEN_BYTES = 2 * 2 * 2 * 8 * 4  # K and V x 2 layers x 2 kv heads x head_dim 8 x fp32 (tiny_lm)


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def scheduler(num_blocks: int, budget: int, seqs: int, **kw) -> Scheduler:
    config = EngineConfig(block_size=BS, max_num_batched_tokens=budget, max_num_seqs=seqs, **kw)
    return Scheduler(config, KVCacheManager(num_blocks, BS))


def add(s: Scheduler, rid: str, prompt: list[int], max_tokens: int) -> Request:
    req = Request(rid, prompt, SamplingParams(max_tokens=max_tokens, ignore_eos=True), float(len(s.waiting)),
                  s.manager.request_block_hashes(prompt))
    s.add_request(req)
    return req


def step(s: Scheduler) -> list[tuple[str, int]]:
    """One step as the engine runs it, the model replaced by token 7: a chunk that reaches the last known
    token samples one; a request with max_tokens outputs finishes and frees its blocks."""
    out = s.schedule()
    for chunk in out.chunks:
        if chunk.samples:
            req = chunk.request
            req.output_token_ids.append(7)
            if len(req.output_token_ids) >= req.sampling_params.max_tokens:
                s.finish(req, "length")
    s.manager.block_pool.check_invariants()
    return [(c.request.request_id, c.num_tokens) for c in out.chunks]


def test_smallest_case_keeps_the_big_prompt_waiting_until_its_whole_prompt_fits():
    """Block size 4, 3 blocks (null block + 2), budget 2, 2 seats: after holder's block 1 only block 2 is free,
    big's 5 tokens need 2 blocks, so vLLM 0.33.0 keeps big waiting (its first chunk of 1 token would fit)."""
    s = scheduler(3, budget=2, seqs=2)
    add(s, "holder", [1], 1)
    big = add(s, "big", [101, 102, 103, 104, 105], 1)
    assert step(s) == [("holder", 1)]
    assert big.status is RequestStatus.WAITING and list(s.waiting) == [big]
    assert "big" not in s.manager.request_ids and s.manager.block_pool.get_num_free_blocks() == 2
    assert step(s) == [("big", 2)]  # holder finished: both blocks free, big's whole prompt fits
    assert s.manager.block_ids("big") == [1]  # only the chunk's blocks are allocated, as in vLLM
    assert step(s) == [("big", 2)] and step(s) == [("big", 1)]
    assert not s.has_unfinished_requests() and s.manager.block_pool.get_num_free_blocks() == 2


def test_the_engine_runs_the_smallest_case_as_vllm(lm):
    """The same case on the engine (tiny Llama): step 0 computes holder's token only; big then runs alone."""
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=3 * BS * TOKEN_BYTES,
                                        max_num_batched_tokens=2, max_num_seqs=2))
    assert engine.num_blocks == 3 and engine.config.scheduler_reserve_full_isl
    engine.add_request("holder", [1], SamplingParams(max_tokens=1))
    engine.add_request("big", [11, 12, 13, 14, 15], SamplingParams(max_tokens=1))
    done = {}
    while engine.has_unfinished_requests():
        done.update({o.request_id: o for o in engine.step() if o.finished})
    plans = [[(i.request_id, i.num_tokens) for i in s.items] for s in engine.steps]
    assert plans == [[("holder", 1)], [("big", 2)], [("big", 2)], [("big", 1)]]
    assert set(done) == {"holder", "big"} and engine.stats().num_preemptions == 0


def test_without_the_setting_only_the_first_chunk_must_fit():
    """``scheduler_reserve_full_isl=False`` (vLLM's --no-scheduler-reserve-full-isl): big is admitted with its
    first chunk in block 2."""
    s = scheduler(3, budget=2, seqs=2, scheduler_reserve_full_isl=False)
    add(s, "holder", [1], 1)
    add(s, "big", [101, 102, 103, 104, 105], 1)
    assert step(s) == [("holder", 1), ("big", 1)]
    assert s.manager.block_ids("big") == [2]


def test_a_hit_on_a_held_block_costs_nothing():
    """The whole sequence less its hit: b's first block is cached and held by a, so b needs one block, not two."""
    s = scheduler(4, budget=8, seqs=3)
    add(s, "a", [1, 2, 3, 4, 5], 3)
    assert step(s) == [("a", 5)] and s.manager.block_pool.get_num_free_blocks() == 1
    b = add(s, "b", [1, 2, 3, 4, 9, 9, 9], 2)
    assert step(s) == [("a", 1), ("b", 3)]
    assert s.manager.block_ids("b") == [1, 3] and b.num_cached_tokens == 4


def test_a_hit_on_a_free_cached_block_counts_against_the_free_blocks():
    """A free cached hit block leaves the free queue when hit (vLLM's evictable blocks), so it counts: c's
    3 blocks less 1 hit plus that hit block are 3 > 2 free; its first chunk alone (2 blocks) would fit."""
    s = scheduler(4, budget=4, seqs=3)
    add(s, "x", [1, 2, 3, 4, 5], 1)
    while s.has_unfinished_requests():
        step(s)
    cached = s.manager.block_pool.blocks[1]
    assert cached.block_hash is not None and cached.ref_cnt == 0
    add(s, "h", [60], 6)
    c = add(s, "c", [1, 2, 3, 4] + [9] * 8, 1)
    assert step(s) == [("h", 1)] and s.manager.block_ids("h") == [2]
    while "h" in s.manager.request_ids:
        assert c.status is RequestStatus.WAITING
        step(s)
    assert step(s) == [("c", 4)] and c.num_cached_tokens == 4 and s.manager.block_ids("c")[0] == 1


def test_without_the_setting_the_first_chunk_of_the_same_request_is_admitted():
    s = scheduler(4, budget=4, seqs=3, scheduler_reserve_full_isl=False)
    add(s, "x", [1, 2, 3, 4, 5], 1)
    while s.has_unfinished_requests():
        step(s)
    add(s, "h", [60], 6)
    add(s, "c", [1, 2, 3, 4] + [9] * 8, 1)
    assert step(s) == [("h", 1), ("c", 3)]


def test_a_preempted_request_resumes_only_when_its_prompt_and_outputs_fit():
    """A resumed request's whole sequence is its prompt and every token it generated (vLLM's
    ``request.num_tokens``). r0's fifth token preempts r2 and r1; r0 finishes; r1 resumes on 2 of the 3 free
    blocks; r2's 5 tokens need 2 (its own cached block, free, counts) with 1 free, so it waits, where
    admitting its first chunk alone gets it preempted again and again."""
    preemptions = {}
    for full in (True, False):
        s = scheduler(4, budget=4, seqs=3, scheduler_reserve_full_isl=full)
        add(s, "r0", [1], 5), add(s, "r1", [101], 9)
        r2 = add(s, "r2", [201], 5)
        plans = [step(s) for _ in range(5)]
        assert plans[-1] == [("r0", 1)] and r2.status is RequestStatus.PREEMPTED and len(r2.all_token_ids) == 5
        free = s.manager.block_pool.get_num_free_blocks()
        plans.append(step(s))
        if full:
            assert free == 3 and plans[-1] == [("r1", 1)] and s.manager.block_pool.get_num_free_blocks() == 1
        else:
            assert plans[-1] == [("r1", 1), ("r2", 3)]
        while s.has_unfinished_requests():
            step(s)
        preemptions[full] = r2.num_preemptions
    assert preemptions == {True: 1, False: 3}


def test_priority_ties_go_to_the_smaller_request_id_as_vllms_heap():
    """vLLM 0.33.0's priority queue orders by (priority, arrival_time, request_id) (``Request.__lt__``):
    of two requests with one priority and one arrival time, "a" goes first though "b" was queued first."""
    s = scheduler(8, budget=8, seqs=1, scheduling_policy="priority")
    for rid in ("b", "a"):
        s.add_request(Request(rid, [1, 2], SamplingParams(max_tokens=1), 5.0, s.manager.request_block_hashes([1, 2])))
    assert step(s) == [("a", 2)] and step(s) == [("b", 2)]


def test_without_chunked_prefill_the_budget_must_hold_the_longest_sequence(lm):
    """vLLM 0.33.0 refuses ``max_num_batched_tokens < max_model_len`` with chunked prefill off
    (``SchedulerConfig.verify_max_model_len``): a longer prompt could never be scheduled and would stall the
    queue behind it. With a budget that holds max_model_len, a whole prompt is one step."""
    small = EngineConfig(block_size=BS, kv_cache_bytes=16 * BS * TOKEN_BYTES, max_num_batched_tokens=8,
                         max_model_len=28, enable_chunked_prefill=False)
    with pytest.raises(CodedError) as err:
        LLMEngine(lm, small)
    assert err.value.code == "bad_engine_setting" and "max_model_len" in str(err.value)
    engine = LLMEngine(lm, dataclasses.replace(small, max_num_batched_tokens=28))
    assert engine.max_model_len == 28
    engine.add_request("a", list(range(1, 20)), SamplingParams(max_tokens=2))
    engine.add_request("b", list(range(30, 41)), SamplingParams(max_tokens=2))
    engine.step()
    assert [(i.request_id, i.num_tokens) for i in engine.steps[0].items] == [("a", 19)]  # b's 11 > 9 left: waits


def _whole_sequence_need(manager: KVCacheManager, req: Request) -> int:
    """Blocks admitting ``req`` takes from the free queue if all of its current tokens got slots now: its
    blocks less the hit, plus the hit blocks that sit free in the queue (computed here, not by the manager)."""
    tokens = req.all_token_ids
    hit = manager.peek_cache_hit(tokens, req.cache_salt)
    in_queue = sum(1 for bid in hit.block_ids if manager.block_pool.blocks[bid].ref_cnt == 0)
    return -(-len(tokens) // BS) - len(hit.block_ids) + in_queue


REQUESTS = st.lists(st.tuples(st.integers(0, 8), st.integers(1, 22), st.integers(1, 8), st.integers(0, 3)),
                    min_size=1, max_size=9)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(reqs=REQUESTS, blocks=st.integers(3, 10), budget=st.integers(1, 9), seqs=st.integers(1, 4),
       policy=st.sampled_from(["fcfs", "priority"]), seed=st.integers(0, 3))
def test_random_sequences_never_admit_what_cannot_fit_and_all_finish(lm, reqs, blocks, budget, seqs, policy, seed):
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=blocks * BS * TOKEN_BYTES,
                                        max_num_batched_tokens=budget, max_num_seqs=seqs, scheduling_policy=policy))
    manager, pool = engine.manager, engine.pool
    rng = random.Random(seed)
    shared = [rng.randrange(1, VOCAB) for _ in range(12)]
    admitted: list[tuple[str, int, int]] = []
    original = manager.add_request

    def checked_add(request_id, token_ids, cache_salt=None, **kw):
        req = engine.requests[request_id]
        need, free = _whole_sequence_need(manager, req), pool.get_num_free_blocks()
        result = original(request_id, token_ids, cache_salt, **kw)
        if result.ok:
            admitted.append((request_id, need, free))
            assert need <= free, f"{request_id} admitted: its whole sequence needs {need} blocks, {free} free"
        return result

    manager.add_request = checked_add
    added, finished, steps = [], set(), 0
    for i, (at_step, length, max_tokens, shared_len) in enumerate(sorted(reqs)):
        while steps < at_step and engine.has_unfinished_requests():
            finished |= {o.request_id for o in engine.step() if o.finished}
            steps += 1
            pool.check_invariants()
        ids = (shared[:shared_len * BS] + [rng.randrange(1, VOCAB) for _ in range(length)])[:engine.max_model_len - 1]
        engine.add_request(f"r{i}", ids, SamplingParams(max_tokens=max_tokens, ignore_eos=True), priority=i % 3)
        added.append(f"r{i}")
    for _ in range(2000):  # bounded: a request that could never be admitted would stall the loop
        if not engine.has_unfinished_requests():
            break
        finished |= {o.request_id for o in engine.step() if o.finished}
        pool.check_invariants()
    assert not engine.has_unfinished_requests() and finished == set(added)
    assert {rid for rid, _, _ in admitted} == set(added)
    assert pool.get_num_free_blocks() == engine.num_blocks - 1 and all(b.ref_cnt == 0 for b in pool.blocks)
    assert manager.request_ids == []
