"""Paged vs contiguous memory maths: hand-checkable cases and invariants."""

from __future__ import annotations

from collections import deque

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvviz.analysis.paging.alloc import ContiguousAllocator, Seq, account_slots
from kvviz.analysis.paging.experiment import (
    PAPER_UTILISATION_BAND,
    WASTE_KINDS,
    PagingConfig,
    Request,
    make_requests,
    reservation_tokens,
)
from kvviz.analysis.paging.sim import compare_layouts, simulate_layout, snapshot_at


def one_request(**kw) -> PagingConfig:
    base = dict(memory_tokens=64, block_size=16, num_requests=1, shared_prefix=0, prompt_min=10,
                prompt_max=10, output_min=3, output_max=3, max_model_len=64)
    base.update(kw)
    return PagingConfig(**base)


def test_one_request_contiguous_oracle_by_hand():
    res = simulate_layout(one_request(reservation="oracle"), "contiguous")
    assert res.steps == 3  # admitted at step 0, writes 3 output tokens, freed at step 3
    first = res.records[0].slots
    assert first == {"stored": 10, "duplicate": 0, "reserved": 3, "internal": 0, "external": 0, "free": 51}
    assert res.records[0].utilisation == pytest.approx(10 / 13)
    assert [r.slots["stored"] for r in res.records] == [10, 11, 12, 0]  # step 3: done, all free


def test_one_request_contiguous_max_reserves_everything():
    res = simulate_layout(one_request(reservation="max"), "contiguous")
    first = res.records[0].slots
    assert first["internal"] == 64 - 13 and first["reserved"] == 3 and first["free"] == 0
    assert res.records[0].utilisation == pytest.approx(10 / 64)


def test_pow2_reservation_rounds_up_and_caps():
    cfg = one_request(reservation="pow2", max_model_len=64)
    assert reservation_tokens(Request(0, 10, 3), cfg) == 16
    assert reservation_tokens(Request(0, 16, 0), cfg) == 16
    assert reservation_tokens(Request(0, 40, 20), cfg) == 64


def test_one_request_paged_wastes_under_one_block():
    res = simulate_layout(one_request(), "paged")
    slots = res.records[0].slots
    assert slots == {"stored": 10, "duplicate": 0, "reserved": 0, "internal": 6, "external": 0, "free": 48}
    assert res.records[0].utilisation == pytest.approx(10 / 16)


def test_first_fit_leaves_external_fragmentation():
    cfg = PagingConfig(memory_tokens=16, block_size=1, num_requests=1, shared_prefix=0, prompt_min=1,
                       prompt_max=1, output_min=1, output_max=1, max_model_len=16, reservation="oracle")
    alloc = ContiguousAllocator(cfg)
    seqs = [Seq(Request(i, 2, 2), length=2) for i in range(3)]
    for s in seqs:
        assert alloc.try_admit(s)
    alloc.release(seqs[1])  # holes: [4, 8) and [12, 16): 8 free slots, no hole of 6
    big = Seq(Request(9, 3, 3), length=3)
    assert not alloc.try_admit(big)
    slots = account_slots("contiguous", alloc, cfg, [seqs[0], seqs[2]], deque([big]))
    assert slots["external"] == 8 and slots["free"] == 0
    assert sum(slots.values()) == 16


def test_shared_prefix_is_duplicated_contiguous_but_shared_paged():
    cfg = PagingConfig(memory_tokens=256, block_size=16, num_requests=2, shared_prefix=40, prompt_min=8,
                       prompt_max=8, output_min=4, output_max=4, max_model_len=128, reservation="oracle")
    cont = simulate_layout(cfg, "contiguous").records[0].slots
    assert cont["duplicate"] == 40  # the second request's private copy
    paged = simulate_layout(cfg, "paged").records[0].slots
    # 40 = two full shared blocks (32 tokens, stored once) + an 8-token tail each request keeps
    assert paged["duplicate"] == 8
    assert paged["stored"] == 32 + 2 * (48 - 32) - 8
    unshared = simulate_layout(PagingConfig(**{**cfg.__dict__, "share_prefix": False}), "paged")
    assert unshared.records[0].slots["duplicate"] == 40


@settings(max_examples=15, deadline=None)
@given(
    memory_blocks=st.integers(8, 64),
    block_size=st.sampled_from([1, 4, 16]),
    n=st.integers(1, 12),
    shared=st.integers(0, 40),
    reservation=st.sampled_from(["max", "pow2", "oracle"]),
    share=st.booleans(),
    seed=st.integers(0, 5),
)
def test_slots_partition_memory_and_paged_waste_is_bounded(memory_blocks, block_size, n, shared,
                                                            reservation, share, seed):
    memory = max(memory_blocks * block_size, 128)
    memory += -memory % block_size
    cfg = PagingConfig(memory_tokens=memory, block_size=block_size, num_requests=n, shared_prefix=shared,
                       prompt_min=1, prompt_max=40, output_min=1, output_max=40,
                       max_model_len=min(memory, 128), reservation=reservation, share_prefix=share, seed=seed)
    for layout in ("contiguous", "paged"):
        res = simulate_layout(cfg, layout)
        assert res.records[-1].finished == n
        for rec in res.records:
            assert sum(rec.slots.values()) == memory
            assert all(v >= 0 for v in rec.slots.values())
            assert 0.0 <= rec.utilisation <= 1.0
            if layout == "paged":
                assert rec.slots["internal"] <= (block_size - 1) * rec.running
                assert rec.slots["reserved"] == rec.slots["external"] == 0


def test_default_stream_matches_the_paper_story():
    cmp = compare_layouts(PagingConfig())
    low, high = PAPER_UTILISATION_BAND
    assert cmp.contiguous.utilisation < 0.5
    assert cmp.paged.utilisation > 0.9
    assert cmp.paged.requests_fit_at_start > 2 * cmp.contiguous.requests_fit_at_start
    assert cmp.paged.steps < cmp.contiguous.steps
    assert set(cmp.contiguous.waste_share) == set(WASTE_KINDS)
    assert sum(cmp.contiguous.waste_share.values()) == pytest.approx(1.0)
    assert low < high
    # the headline ratios the page shows are the comparison's own, and the CLI rounds the same numbers
    assert cmp.speedup_steps == cmp.contiguous.steps / cmp.paged.steps > 1
    assert cmp.fit_ratio == cmp.paged.requests_fit_at_start / cmp.contiguous.requests_fit_at_start > 2
    assert cmp.to_dict()["speedup_steps"] == round(cmp.speedup_steps, 3)


def test_seeded_stream_is_reproducible_and_seed_sensitive():
    assert make_requests(PagingConfig(seed=3)) == make_requests(PagingConfig(seed=3))
    assert make_requests(PagingConfig(seed=3)) != make_requests(PagingConfig(seed=4))


def test_snapshot_spans_cover_memory_and_blocks_match_tables():
    cmp = compare_layouts(PagingConfig(), snapshot_step=50)
    spans = cmp.contiguous.snapshot.spans
    assert spans[0].start == 0 and sum(s.length for s in spans) == 8192
    assert all(a.start + a.length == b.start for a, b in zip(spans, spans[1:], strict=False))
    snap = cmp.paged.snapshot
    assert len(snap.blocks) == 8192 // 16
    for rid, table in snap.block_tables.items():
        assert len(table) * 16 >= snap.lengths[rid] > (len(table) - 1) * 16
        assert len(set(table)) == len(table)
    shared = [b for b in snap.blocks if b.kind == "shared"]
    assert shared and all(b.ref_cnt == len(snap.block_tables) for b in shared)


@pytest.mark.parametrize(
    "kw, message",
    [
        (dict(memory_tokens=100), "multiple of block_size"),
        (dict(memory_tokens=10**9), "memory_tokens"),
        (dict(num_requests=0), "num_requests"),
        (dict(reservation="best"), "reservation"),
        (dict(prompt_min=50, prompt_max=10), "prompt_min"),
        (dict(max_model_len=512), "exceeds max_model_len"),
        (dict(num_requests=2000, output_max=1000, max_model_len=4096), "num_requests x output_max"),
    ],
)
def test_validation_rejects_absurd_configs(kw, message):
    with pytest.raises(ValueError, match=message):
        simulate_layout(PagingConfig(**kw), "paged")


def test_snapshot_at_stops_early_and_matches_the_full_run():
    cfg = PagingConfig(reservation="oracle")
    for layout in ("contiguous", "paged"):
        full = simulate_layout(cfg, layout, snapshot_step=120)
        snap, rec = snapshot_at(cfg, layout, 120)
        assert snap == full.snapshot and rec == full.records[120]
        late, last = snapshot_at(cfg, layout, full.steps + 50)  # past the end: empty memory
        assert last == full.records[-1] and all(b.kind == "free" for b in late.blocks + late.spans)
