"""The engine on a tiny random Llama (fast lane): generation equals the plain decoder, preemption and
chunked prefill change nothing, aborts free blocks, random operation sequences keep the pool's invariants
and leave every block free, a cached block holds what a fresh prefill of its prefix computes."""

from __future__ import annotations

import random

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tiny_llm import VOCAB, greedy_reference, reference_logits, tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams, engine_supports
from kvviz.errors import CodedError
from kvviz.mirror.kv_events import AllBlocksCleared, BlockStored

BS = 4
TOKEN_BYTES = 2 * 2 * 2 * 8 * 4  # K and V x 2 layers x 2 kv heads x head_dim 8 x fp32


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def engine_with(lm, blocks: int, budget: int = 16, **kw) -> LLMEngine:
    return LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=blocks * BS * TOKEN_BYTES,
                                      max_num_batched_tokens=budget, **kw))


def drain(engine: LLMEngine) -> dict:
    done = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out
        engine.pool.check_invariants()
    return done


def _prompts(seed: int, n: int, shared: int = 0) -> list[list[int]]:
    rng = random.Random(seed)
    head = [rng.randrange(1, VOCAB) for _ in range(shared)]
    return [head + [rng.randrange(1, VOCAB) for _ in range(rng.randrange(1, 23))] for _ in range(n)]


def test_sizes_measured_from_tensors(lm):
    engine = engine_with(lm, 40)
    assert engine.num_blocks == 40 and engine.block_size == BS
    assert engine.kv_cache_bytes == 40 * BS * TOKEN_BYTES == engine.memory.block_bytes * 40
    assert engine.memory.k[0].shape == (40, BS, 2, 8)


def test_concurrent_greedy_equals_plain_decoder_with_preemption(lm):
    prompts = _prompts(1, 6, shared=9)
    engine = engine_with(lm, 24)  # too few blocks for all six: the newest are preempted and resumed
    for i, ids in enumerate(prompts):
        engine.add_request(f"r{i}", ids, SamplingParams(max_tokens=18, ignore_eos=True))
    done = drain(engine)
    assert engine.stats().num_preemptions > 0
    assert engine.stats().prefix_cache_hits > 0
    for i, ids in enumerate(prompts):
        assert done[f"r{i}"].token_ids == greedy_reference(lm, ids, 18)
        assert done[f"r{i}"].finish_reason == "length"


def test_seeded_sampling_same_with_and_without_preemption(lm):
    prompts = _prompts(2, 5, shared=5)
    params = SamplingParams(max_tokens=15, temperature=0.8, top_p=0.9, seed=7, ignore_eos=True)
    runs = []
    for blocks in (400, 20):
        engine = engine_with(lm, blocks)
        for i, ids in enumerate(prompts):
            engine.add_request(f"r{i}", ids, params)
        runs.append({k: v.token_ids for k, v in drain(engine).items()})
        if blocks == 20:
            assert engine.stats().num_preemptions > 0
    assert runs[0] == runs[1]


def test_chunked_prefill_logits_match_unchunked(lm):
    ids = _prompts(3, 1, shared=37)[0]
    engine = engine_with(lm, 64, budget=8)
    engine.chunk_logits = []
    engine.add_request("c", ids, SamplingParams(max_tokens=1))
    drain(engine)
    ref = reference_logits(lm, ids)
    assert len(engine.chunk_logits) == -(-len(ids) // 8)
    for _, start, logits in engine.chunk_logits:
        assert (logits - ref[start:start + logits.shape[0]]).abs().max().item() <= 1e-4


def test_prefix_hit_reuses_block_ids_no_copy(lm):
    engine = engine_with(lm, 64)
    ids = _prompts(4, 1, shared=13)[0]
    engine.add_request("a", ids, SamplingParams(max_tokens=3))
    engine.step()
    first = engine.block_tables()["a"]
    engine.add_request("b", ids[:12] + [5, 6], SamplingParams(max_tokens=3))
    engine.step()
    second = engine.block_tables()["b"]
    assert second[:3] == first[:3]  # same physical blocks: the hit is the block table
    assert all(engine.pool.blocks[b].ref_cnt == 2 for b in first[:3])
    done = drain(engine)
    assert done["b"].num_cached_tokens == 12


def test_stop_eos_max_tokens_and_stop_strings(lm):
    engine = engine_with(lm, 64)
    ids = [3, 4, 5, 6, 7]
    ref = greedy_reference(lm, ids, 8)
    engine.add_request("s", ids, SamplingParams(max_tokens=8, stop=(f"<{ref[2]}>",), ignore_eos=True))
    out = drain(engine)["s"]
    assert out.finish_reason == "stop" and out.token_ids == ref[:ref.index(ref[2]) + 1]
    assert f"<{ref[2]}>" not in out.text
    engine.eos_token_id = ref[1]
    engine.add_request("e", ids, SamplingParams(max_tokens=8))
    out = drain(engine)["e"]
    assert out.finish_reason == "stop" and out.token_ids == ref[:ref.index(ref[1]) + 1]


def test_abort_frees_blocks_and_reports(lm):
    engine = engine_with(lm, 64)
    engine.add_request("x", list(range(1, 20)), SamplingParams(max_tokens=50))
    engine.add_request("w", list(range(1, 9)), SamplingParams(max_tokens=50))
    engine.step()
    engine.abort_request("x")
    engine.abort_request("x")  # idempotent
    engine.abort_request("w")
    outs = engine.step()
    assert {(o.request_id, o.finish_reason, o.finished) for o in outs} == {("x", "abort", True), ("w", "abort", True)}
    assert engine.pool.get_num_free_blocks() == engine.num_blocks - 1
    assert not engine.has_unfinished_requests()


def test_bad_requests_are_coded_errors(lm):
    engine = engine_with(lm, 16)
    engine.add_request("a", [1, 2], SamplingParams(max_tokens=1))
    for rid, ids, code in [("a", [1], "request_running"), ("", [1], "bad_request_id"), ("b", [], "no_tokens"),
                           ("c", [VOCAB], "token_out_of_vocab"), ("d", [1] * 60, "prompt_too_long"),
                           ("e", "abc", "tokens_not_list")]:
        with pytest.raises(CodedError) as err:
            engine.add_request(rid, ids, SamplingParams())
        assert err.value.code == code
    for bad in [dict(max_tokens=0), dict(temperature=-1), dict(top_p=0), dict(seed=2**64), dict(stop=("",)),
                    dict(logprobs=-1), dict(stop_token_ids=(-1,))]:
        with pytest.raises(CodedError):
            SamplingParams(**bad)


def test_kv_events_are_the_cores_and_published(lm):
    engine = engine_with(lm, 16)
    batches = []
    unsubscribe = engine.subscribe_kv_events(batches.append)
    engine.add_request("a", list(range(1, 14)), SamplingParams(max_tokens=2))
    drain(engine)
    stored = [e for b in batches for e in b.events if isinstance(e, BlockStored)]
    assert stored and [h for e in stored for h in e.block_hashes] == engine.manager.request_block_hashes(
        list(range(1, 14)))
    assert engine.reset_prefix_cache()
    assert isinstance(batches[-1].events[-1], AllBlocksCleared)
    unsubscribe()
    engine.add_request("b", [1, 2, 3, 4, 5], SamplingParams(max_tokens=1))
    n = len(batches)
    drain(engine)
    assert len(batches) == n


OPS = st.lists(st.tuples(st.sampled_from(["add", "add", "add", "step", "step", "abort"]),
                         st.integers(0, 7), st.integers(1, 20), st.integers(1, 9)), min_size=5, max_size=40)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, blocks=st.integers(8, 20), budget=st.integers(3, 12), seed=st.integers(0, 3))
def test_random_operations_keep_pool_invariants(lm, ops, blocks, budget, seed):
    engine = engine_with(lm, blocks, budget=budget, max_num_seqs=4)
    rng = random.Random(seed)
    shared = [rng.randrange(1, VOCAB) for _ in range(10)]
    live: set[str] = set()
    n = 0
    for op, who, length, new in ops:
        if op == "add":
            ids = (shared[: who + 2] + [rng.randrange(1, VOCAB) for _ in range(length)])[: (blocks - 2) * BS - 1]
            rid = f"q{n}"
            n += 1
            engine.add_request(rid, ids, SamplingParams(max_tokens=new, ignore_eos=True))
            live.add(rid)
        elif op == "abort" and live:
            engine.abort_request(sorted(live)[who % len(live)])
        else:
            for out in engine.step():
                if out.finished:
                    live.discard(out.request_id)
        engine.pool.check_invariants()
    drain(engine)
    pool = engine.pool
    assert pool.get_num_free_blocks() == engine.num_blocks - 1
    assert all(b.ref_cnt == 0 for b in pool.blocks)
    # every cached block holds the K/V a fresh prefill of its prefix computes
    for h, by_id in pool.cached_block_hash_to_block.items():
        for bid in by_id:
            k, _v, tokens = engine.kv_of_block(bid)
            assert len(tokens) == BS
            prefix = _prefix_of(engine, h)
            assert prefix is not None and prefix[-BS:] == tokens
            with torch.inference_mode():
                cache = lm.model(input_ids=torch.tensor([prefix]), use_cache=True).past_key_values
            for layer in range(2):
                fresh = cache.layers[layer].keys[0, :, -BS:].transpose(0, 1)
                assert (k[layer] - fresh).abs().max().item() <= 1e-4


def _prefix_of(engine: LLMEngine, block_hash) -> list[int] | None:
    """The whole token prefix ending with the block cached under ``block_hash``, from the BlockStored events."""
    parent_of, tokens_of = {}, {}
    for e in engine.events:
        for kv in e.kv_events:
            if isinstance(kv, BlockStored):
                parent = kv.parent_block_hash
                for j, h in enumerate(kv.block_hashes):
                    parent_of[h] = parent
                    tokens_of[h] = kv.token_ids[j * BS:(j + 1) * BS]
                    parent = h
    chain = []
    while block_hash is not None:
        if block_hash not in tokens_of:
            return None
        chain.append(tokens_of[block_hash])
        block_hash = parent_of[block_hash]
    return [t for part in reversed(chain) for t in part]


def test_event_log_stays_bounded_and_block_tokens_survive(lm, monkeypatch):
    import kvviz.engine.engine as engine_module

    monkeypatch.setattr(engine_module, "MAX_EVENTS", 60)
    engine = engine_with(lm, 24)
    batches = []
    engine.subscribe_kv_events(batches.append)
    prompts = _prompts(9, 30, shared=6)
    computed = []  # every request's tokens whose K/V were computed: its prompt and all outputs but the last
    for i, ids in enumerate(prompts):
        engine.add_request(f"e{i}", ids, SamplingParams(max_tokens=3, ignore_eos=True))
        computed.append(ids + drain(engine)[f"e{i}"].token_ids[:-1])
        assert len(engine.events) <= 60
    seqs = [e.seq for e in engine.events]
    assert seqs == sorted(seqs) and seqs[0] > 0 and engine.pool.num_events_dropped == seqs[0]
    for by_id in engine.pool.cached_block_hash_to_block.values():
        for bid in by_id:
            tokens = engine.kv_of_block(bid)[2]
            assert len(tokens) == BS and any(tokens == c[j:j + BS] for c in computed for j in range(0, len(c), BS))
    stored = sum(len(e.block_hashes) for b in batches for e in b.events if isinstance(e, BlockStored))
    assert stored >= len(engine.pool.cached_block_hash_to_block)  # every event was published before the cut


def test_priority_policy_preempts_the_lowest_priority_and_admits_the_highest_first(lm):
    prompts = _prompts(5, 5, shared=3)
    outs = {}
    for policy in ("fcfs", "priority"):
        engine = engine_with(lm, 14, scheduling_policy=policy)
        # a, b low priority (5) first, c urgent (0) last: FCFS preempts c (the newest), priority preempts b
        for rid, ids, prio in [("a", prompts[0], 5), ("b", prompts[1], 5), ("c", prompts[2], 0)]:
            engine.add_request(rid, ids[:9], SamplingParams(max_tokens=14, ignore_eos=True), priority=prio)
        engine.step()
        # d (5) then e (0) wait; under the priority policy e is admitted before d
        engine.add_request("d", prompts[3][:6], SamplingParams(max_tokens=4, ignore_eos=True), priority=5)
        engine.add_request("e", prompts[4][:6], SamplingParams(max_tokens=4, ignore_eos=True), priority=0)
        outs[policy] = drain(engine)
        for rid, ids in zip("abcde", [p[:9] for p in prompts[:3]] + [p[:6] for p in prompts[3:]], strict=True):
            assert outs[policy][rid].token_ids == greedy_reference(lm, ids, len(outs[policy][rid].token_ids))
    assert outs["fcfs"]["c"].num_preemptions > 0
    prio = outs["priority"]
    assert prio["c"].num_preemptions == 0 and prio["b"].num_preemptions > 0
    assert prio["e"].metrics.first_scheduled_time < prio["d"].metrics.first_scheduled_time
    with pytest.raises(CodedError):
        EngineConfig(scheduling_policy="lifo")


def test_step_records_say_what_each_request_computed(lm):
    """StepRecord.items: a prompt from scratch, the tail of a prompt whose prefix is cached (the tokens
    before it read from blocks), then decode steps; a later chunk of a long prompt keeps its own kind."""
    engine = engine_with(lm, 64, budget=12)
    ids = _prompts(5, 1, shared=14)[0]
    engine.add_request("a", ids, SamplingParams(max_tokens=1))
    drain(engine)
    engine.add_request("b", ids[:12] + [7, 8, 9], SamplingParams(max_tokens=3, ignore_eos=True))
    engine.add_request("c", list(range(1, 20)), SamplingParams(max_tokens=2, ignore_eos=True))
    drain(engine)
    items = [(s.step, i.request_id, i.kind, i.start, i.num_tokens) for s in engine.steps for i in s.items]
    first_a = [x for x in items if x[1] == "a"]
    assert len(first_a) >= 2 and all(x[2] == "scratch" for x in first_a) and first_a[1][3] == 12  # chunks of 12
    b = [x for x in items if x[1] == "b"]
    assert b[0][2:] == ("cached", 12, 3) and [x[2] for x in b[1:]] == ["decode", "decode"]
    c = [x for x in items if x[1] == "c"]
    assert c[0][2] == "scratch" and c[0][3] == 0 and c[-1][2] == "decode"
    for s in engine.steps:
        assert s.prefill_tokens + s.decode_tokens == sum(i.num_tokens for i in s.items)
        assert s.decode_tokens == sum(i.num_tokens for i in s.items if i.kind == "decode")
        assert s.started_at > 0 and s.duration_s >= 0


def test_another_architecture_is_refused_with_a_coded_error(lm):
    """A model loaded through transformers (not the native Llama decoder) is refused, naming the model and
    its architecture; the tiny model's own weights are untouched by the attempt."""
    import dataclasses

    other = dataclasses.replace(lm, info=dataclasses.replace(lm.info, backend="transformers", name="tiny-gpt2",
                                                              architecture="GPT2LMHeadModel"))
    assert engine_supports(lm) is None and "GPT2LMHeadModel" in engine_supports(other)
    with pytest.raises(CodedError) as err:
        LLMEngine(other, EngineConfig(block_size=BS, kv_cache_bytes=40 * BS * TOKEN_BYTES))
    assert err.value.code == "engine_unsupported_model"
    assert err.value.params == {"model": "tiny-gpt2", "architecture": "GPT2LMHeadModel"}
    assert "tiny-gpt2" in str(err.value) and "native" in str(err.value)
