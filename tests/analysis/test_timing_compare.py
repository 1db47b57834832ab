"""The noise decision behind "ms saved" and "x faster": a pure function of the
samples. Overlapping samples (a 28-token edit on a busy CPU) give no saving at all, never a negative
one or a speed-up below 1x."""

from __future__ import annotations

import pytest

from kvviz.analysis.timing_compare import MIN_SAMPLES, compare_samples, win_share


def test_clearly_faster_path_is_measured():
    cmp = compare_samples([100, 104, 98, 101, 99], [20, 22, 19, 21, 25])
    assert cmp.measured
    assert cmp.slow_median_ms == 100 and cmp.fast_median_ms == 21
    assert cmp.saved_ms == 79 and cmp.speedup == pytest.approx(100 / 21)
    assert cmp.slow_spread_ms == 6 and cmp.fast_spread_ms == 6


def test_single_noisy_timings_that_once_gave_a_negative_saving_are_within_the_noise():
    # the issue: one full prefill 230 ms, one reuse prefill 367 ms -> "-137 ms saved", "0.6x faster"
    cmp = compare_samples([230, 380, 250, 400, 240], [367, 240, 390, 235, 260])
    assert not cmp.measured
    assert cmp.saved_ms is None and cmp.speedup is None


def test_overlapping_samples_are_within_the_noise_even_when_the_median_is_lower():
    cmp = compare_samples([50, 52, 70, 49, 51], [48, 53, 47, 69, 50])
    assert cmp.fast_median_ms < cmp.slow_median_ms
    assert not cmp.measured and cmp.speedup is None


def test_fast_path_slower_is_never_a_speedup():
    cmp = compare_samples([10, 11, 10, 12, 11], [20, 21, 22, 20, 23])
    assert not cmp.measured and cmp.saved_ms is None and cmp.speedup is None


def test_identical_samples_are_within_the_noise():
    cmp = compare_samples([5.0] * 5, [5.0] * 5)
    assert cmp.win_share == 0.5 and not cmp.measured


def test_too_few_samples_never_count_as_measured():
    cmp = compare_samples([100.0] * (MIN_SAMPLES - 1), [1.0] * (MIN_SAMPLES - 1))
    assert not cmp.measured


def test_invariant_measured_implies_a_positive_saving_and_speedup_above_one():
    import random

    rng = random.Random(7)
    for _ in range(500):
        slow = [rng.uniform(1, 100) for _ in range(rng.randint(1, 7))]
        fast = [rng.uniform(1, 100) for _ in range(rng.randint(1, 7))]
        cmp = compare_samples(slow, fast)
        if cmp.measured:
            assert cmp.saved_ms > 0 and cmp.speedup > 1
        else:
            assert cmp.saved_ms is None and cmp.speedup is None


def test_win_share_counts_ties_half():
    assert win_share([1, 2], [2, 3]) == pytest.approx((1 + 1 + 0.5 + 1) / 4)


def test_no_samples_is_an_error():
    with pytest.raises(ValueError):
        compare_samples([], [1.0])
