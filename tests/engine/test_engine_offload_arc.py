"""ARC eviction for the host tier, as vLLM 0.33.0's cpu/policies/arc.py (``eviction_policy: "arc"``): a
hand-traced sequence (a reused block is promoted to T2 at its request's finish and outlives blocks only
stored; a store of a block in B1 raises T1's target), the engine's setting and flag, and random operation
sequences on the tiny model with ARC (both tiers' invariants, ARC's lists, tokens and host K/V exact)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_engine_offload import OPS, _check_host_blocks, engine_with
from tiny_llm import VOCAB, greedy_reference, tiny_lm

from kvviz.cli import build_parser, main
from kvviz.cli import generate as generate_cli
from kvviz.cli import serve as serve_cli
from kvviz.engine import EngineConfig, SamplingParams
from kvviz.errors import CodedError
from kvviz.mirror.host_pool import HostBlockPool, StoreMeta

META = StoreMeta(None, ())


@pytest.fixture(scope="module")
def lm():
    return tiny_lm()


def store(pool: HostBlockPool, request: str, hashes: list[bytes], first: int = 0) -> None:
    planned = pool.prepare_store(hashes, [META] * len(hashes), request, first)
    assert planned is not None
    pool.complete_store([h for h, _ in planned])


def test_arc_promotes_reused_blocks_and_adapts_to_a_ghost_hit():
    pool = HostBlockPool(3, 4, "arc")
    a, b, c, d, e = (bytes([i]) * 4 for i in range(5))
    store(pool, "r1", [a, b])
    pool.finish_request("r1")  # stored only: T1, head most recent
    assert list(pool.arc.t1) == [b, a] and not pool.arc.t2
    pool.prepare_load([a], "r2", 0)
    pool.complete_load([a])
    store(pool, "r2", [a, c])  # a held: reused; c stored
    pool.finish_request("r2")
    assert list(pool.arc.t1) == [b, c] and list(pool.arc.t2) == [a]  # a reused once: promoted to T2
    store(pool, "r3", [d, e])  # two slots needed, T1 holds >= target 0: its oldest two go to B1
    pool.finish_request("r3")
    assert set(pool.blocks) == {a, d, e} and list(pool.arc.b1) == [b, c] and list(pool.arc.t1) == [e, d]
    store(pool, "r4", [b])  # b is a ghost of T1: the target grows by max(1, |B2|/|B1|) = 1, then T1's oldest goes
    pool.finish_request("r4")
    assert pool.arc.target == 1
    assert set(pool.blocks) == {a, d, b} and list(pool.arc.b1) == [c, e] and list(pool.arc.t2) == [a]
    pool.check_invariants()


def test_a_ghost_of_t2_lowers_the_target_and_a_pinned_block_is_never_chosen():
    pool = HostBlockPool(2, 4, "arc")
    a, b, c = (bytes([i]) * 4 for i in range(3))
    store(pool, "r1", [a])
    pool.finish_request("r1")
    store(pool, "r2", [a, b])  # a reused: T2
    pool.finish_request("r2")
    assert list(pool.arc.t2) == [a] and list(pool.arc.t1) == [b]
    pool.arc.target = 2.0  # T1 below its target: the eviction takes T2's oldest
    store(pool, "r3", [c])
    pool.finish_request("r3")
    assert list(pool.arc.b2) == [a] and set(pool.blocks) == {b, c}
    store(pool, "r4", [a])  # a ghost of T2: target - max(1, |B1|/|B2|) = 1
    assert pool.arc.target == 1.0
    pool.finish_request("r4")
    pool.prepare_load([c], "r5", 0)  # pinned: the next store cannot take c, and b is in the offer
    assert pool.prepare_store([b, bytes([9]) * 4], [META] * 2, "r5", 0) is None
    pool.complete_load([c])
    pool.finish_request("r5")
    pool.check_invariants()


def test_the_setting_and_the_flag():
    assert EngineConfig().kv_offloading_eviction_policy == "lru"
    with pytest.raises(CodedError):
        EngineConfig(kv_offloading_eviction_policy="fifo")
    for module, required in ((serve_cli, []), (generate_cli, ["--prompt", "hi"])):
        cmd = "serve" if module is serve_cli else "generate"
        args = build_parser().parse_args([cmd, *required, "--kv-offloading-eviction-policy", "arc"])
        assert module.engine_config(args).kv_offloading_eviction_policy == "arc"


def test_a_bad_policy_is_one_line_exit_2(capsys):
    assert main(["generate", "--prompt", "hi", "--kv-offloading-eviction-policy", "fifo", "--json"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "\n" not in err and "arc" in err


def test_the_engine_evicts_by_arc(lm):
    engine = engine_with(lm, blocks=6, host_blocks=4, kv_offloading_eviction_policy="arc")
    assert engine.host.pool.arc is not None
    rng = random.Random(3)
    a = [rng.randrange(1, VOCAB) for _ in range(9)]
    for rid, ids in (("a", a), ("b", [rng.randrange(1, VOCAB) for _ in range(9)]), ("a2", a)):
        engine.add_request(rid, ids, SamplingParams(max_tokens=2, ignore_eos=True))
        while engine.has_unfinished_requests():
            engine.step()
    arc = engine.host.pool.arc
    head = engine.manager.request_block_hashes(a)[0]
    assert head in arc.t2  # a's first block, offered again while held by a2: reused, promoted
    assert not engine.host.pool._access  # every finished request's accesses were applied
    engine.host.pool.check_invariants()


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, blocks=st.integers(6, 14), host_blocks=st.integers(1, 12), budget=st.integers(3, 12),
       seed=st.integers(0, 3))
def test_random_operations_with_arc_keep_both_tiers_exact(lm, ops, blocks, host_blocks, budget, seed):
    engine = engine_with(lm, blocks, host_blocks, budget=budget, max_num_seqs=4, kv_offloading_eviction_policy="arc")
    batches = []
    engine.subscribe_kv_events(batches.append)
    rng = random.Random(seed)
    shared = [rng.randrange(1, VOCAB) for _ in range(10)]
    live: dict[str, tuple[list[int], int]] = {}
    done = {}
    for n, (op, who, length, new) in enumerate(ops):
        if op == "add":
            ids = (shared[: who + 2] + [rng.randrange(1, VOCAB) for _ in range(length)])[: (blocks - 2) * 4 - 1]
            engine.add_request(f"q{n}", ids, SamplingParams(max_tokens=new, ignore_eos=True))
            live[f"q{n}"] = (ids, new)
        elif op == "abort" and live:
            rid = sorted(live)[who % len(live)]
            engine.abort_request(rid)
            live.pop(rid)
        else:
            for out in engine.step():
                if out.finished and out.request_id in live:
                    done[out.request_id] = (out, *live.pop(out.request_id))
        engine.host.pool.check_invariants()  # ARC's lists included
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished and out.request_id in live:
                done[out.request_id] = (out, *live.pop(out.request_id))
    engine.host.pool.check_invariants()
    assert not engine.host.pool._access and not engine.host.next_store
    for out, ids, new in done.values():
        assert out.token_ids == greedy_reference(lm, ids, new)[:len(out.token_ids)]
    _check_host_blocks(lm, engine, batches)
