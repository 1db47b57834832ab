"""The room's hit/miss timing comparison: like with like (per prompt token), close in time, with its spread,
and a verdict that never calls hits slower than misses a fact."""

from __future__ import annotations

import pytest

from kvviz.experiments.room.timing import TimingSample, compare_hit_miss


def _s(hit: bool, ms: float, tokens: int = 100, at: float = 100.0) -> TimingSample:
    return TimingSample(hit=hit, compute_ms=ms, num_tokens=tokens, at=at)


def test_hits_that_compute_less_per_token_are_called_faster():
    samples = [_s(True, ms) for ms in (10, 11, 12, 13)] + [_s(False, ms) for ms in (40, 42, 44, 46)]
    c = compare_hit_miss(samples, now=100.0, load_per_core=0.3)
    assert c.verdict == "faster"
    assert c.hit is not None and c.miss is not None
    assert c.hit.n == 4 and c.hit.median == pytest.approx(11.5)  # ms per 100 prompt tokens
    assert c.miss.p25 <= c.miss.median <= c.miss.p75


def test_compares_per_prompt_token_not_per_prompt():
    """A 400-token hit that took 40 ms costs 10 ms per 100 tokens: less than a 50-token miss at 20 ms (40)."""
    samples = [_s(True, 40, tokens=400) for _ in range(3)] + [_s(False, 20, tokens=50) for _ in range(3)]
    c = compare_hit_miss(samples, now=100.0, load_per_core=0.2)
    assert c.hit.median == pytest.approx(10.0) and c.miss.median == pytest.approx(40.0)
    assert c.verdict == "faster"


def test_overlapping_spreads_are_within_the_noise():
    samples = [_s(True, ms) for ms in (10, 30, 50)] + [_s(False, ms) for ms in (20, 40, 60)]
    assert compare_hit_miss(samples, now=100.0, load_per_core=0.2).verdict == "noise"


def test_hits_slower_than_misses_is_never_shown_as_a_fact():
    samples = [_s(True, ms) for ms in (3600, 3700, 3668)] + [_s(False, ms) for ms in (1300, 1371, 1400)]
    quiet = compare_hit_miss(samples, now=100.0, load_per_core=0.2)
    assert quiet.verdict == "inverted"
    busy = compare_hit_miss(samples, now=100.0, load_per_core=2.5)
    assert busy.verdict == "busy"


def test_a_busy_machine_is_said_whatever_the_numbers():
    samples = [_s(True, ms) for ms in (10, 11, 12)] + [_s(False, ms) for ms in (40, 42, 44)]
    c = compare_hit_miss(samples, now=100.0, load_per_core=1.6)
    assert c.verdict == "busy" and c.load_per_core == pytest.approx(1.6)


def test_only_recent_runs_are_compared():
    """Misses from a quiet minute long ago are not set against hits measured now."""
    old = [_s(False, 10, at=0.0) for _ in range(5)]
    new = [_s(True, 50, at=500.0) for _ in range(5)] + [_s(False, 200, at=500.0) for _ in range(3)]
    c = compare_hit_miss(old + new, now=500.0, load_per_core=0.1, window_s=120.0)
    assert c.miss.n == 3 and c.miss.median == pytest.approx(200.0)
    assert c.verdict == "faster"


def test_too_few_runs_say_so():
    samples = [_s(True, 10), _s(True, 11), _s(False, 40)]
    c = compare_hit_miss(samples, now=100.0, load_per_core=0.1)
    assert c.verdict == "too_few" and c.miss.n == 1
    empty = compare_hit_miss([], now=100.0, load_per_core=None)
    assert empty.verdict == "too_few" and empty.hit is None and empty.miss is None


def test_unknown_load_is_not_called_busy():
    samples = [_s(True, ms) for ms in (10, 11, 12)] + [_s(False, ms) for ms in (40, 42, 44)]
    assert compare_hit_miss(samples, now=100.0, load_per_core=None).verdict == "faster"
