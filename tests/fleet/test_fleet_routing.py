"""The router's scorers on hand-built fleets with known answers: llm-d's longest prefix (GPU 1.0, CPU 0.8),
Dynamo's overlap cost (w x prefill blocks + active blocks, lowest wins), round-robin; ties, a longer
prefix on a busier replica, a CPU-tier hit, stale replicas."""

from __future__ import annotations

import pytest

from kvviz.fleet.routing import ReplicaView, longest_prefix_score, overlap_cost, route

G, C, S = frozenset({"GPU"}), frozenset({"CPU"}), frozenset({"STORAGE"})
NO = frozenset()
BS = 16


def _r(name: str, *held: frozenset, load: int = 0, live: bool = True, n: int = 8) -> ReplicaView:
    return ReplicaView(name, tuple(held) + (NO,) * (n - len(held)), load, live)


def test_ties_go_to_the_first_listed() -> None:
    a, b = _r("a", G, G, G), _r("b", G, G, G)
    r = route([a, b], 8 * BS, BS)
    assert r.picks == {"longest_prefix": "a", "overlap_cost": "a", "round_robin": "a"}
    assert route([b, a], 8 * BS, BS).picks["longest_prefix"] == "b"


def test_longer_prefix_on_a_busier_replica() -> None:
    busy, idle = _r("busy", G, G, G, G, load=10), _r("idle", G)
    assert longest_prefix_score(busy) == 4.0 and longest_prefix_score(idle) == 1.0
    # Dynamo: busy = 1.0 x (128 - 64) / 16 + (10 + 8) = 22; idle = 7 + 8 = 15.
    assert overlap_cost(busy, 128, BS) == (22.0, 4.0, 18) and overlap_cost(idle, 128, BS) == (15.0, 7.0, 8)
    r = route([busy, idle], 128, BS)
    assert (r.picks["longest_prefix"], r.picks["overlap_cost"]) == ("busy", "idle")
    # Weighting prefill above load (--kv-overlap-score-weight 4): busy = 4 x 4 + 18 = 34, idle = 4 x 7 + 8 = 36.
    assert route([busy, idle], 128, BS, overlap_weight=4.0).picks["overlap_cost"] == "busy"
    assert route([busy, idle], 128, BS, overlap_weight=3.0).picks["overlap_cost"] == "idle"  # 30 vs 29


def test_cpu_tier_hit() -> None:
    cpu3, gpu3, gpu2 = _r("cpu3", C, C, C), _r("gpu3", G, G, G), _r("gpu2", G, G)
    assert longest_prefix_score(cpu3) == pytest.approx(2.4)
    assert route([cpu3, gpu3], 128, BS).picks["longest_prefix"] == "gpu3"  # 3.0 beats 2.4
    assert route([gpu2, cpu3], 128, BS).picks["longest_prefix"] == "cpu3"  # 2.4 beats 2.0
    # Dynamo's overlap counts a block on any medium: three CPU blocks beat two GPU blocks.
    assert route([gpu2, cpu3], 128, BS).picks["overlap_cost"] == "cpu3"
    # A block on GPU and CPU takes its best weight; a medium llm-d has no weight for counts 1.0.
    assert longest_prefix_score(_r("x", G | C, C, S)) == pytest.approx(1.0 + 0.8 + 1.0)


def test_the_prefix_ends_at_the_first_block_not_held() -> None:
    gap = ReplicaView("gap", (G, NO, G, G), 0)
    assert gap.prefix_blocks == 1 and longest_prefix_score(gap) == 1.0
    assert overlap_cost(gap, 64, BS)[1] == 3.0


def test_stale_replicas_are_never_picked() -> None:
    gone, a, b = _r("gone", G, G, G, G, live=False), _r("a", G), _r("b")
    r = route([gone, a, b], 128, BS, turn=1)
    assert r.picks == {"longest_prefix": "a", "overlap_cost": "a", "round_robin": "b"}
    assert route([gone], 128, BS).picks == {"longest_prefix": None, "overlap_cost": None, "round_robin": None}
    assert [s.name for s in r.scores] == ["gone", "a", "b"] and not r.scores[0].live


def test_round_robin_cycles_over_live_replicas() -> None:
    fleet = [_r("a"), _r("b", live=False), _r("c")]
    assert [route(fleet, 16, BS, turn=t).picks["round_robin"] for t in range(4)] == ["a", "c", "a", "c"]
