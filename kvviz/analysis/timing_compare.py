"""Is one measured path faster than another, or is the difference within this machine's noise?

``compare_samples`` is a pure function of the timed samples (no clock, no thresholds in seconds): the
faster path's median must be lower AND its samples must beat the slower path's in at least
``MIN_WIN_SHARE`` of all pairs (the Mann-Whitney probability). Otherwise the verdict is "within the
noise" and neither a saving nor a speed-up exists, so none can be negative or below 1x.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: Share of (fast, slow) sample pairs in which the fast path must be quicker (ties count half).
#: With 5 samples a side, 0.9 allows 2 of 25 pairs to go the other way.
MIN_WIN_SHARE = 0.9
#: Fewer samples than this on either side: never call a difference measured.
MIN_SAMPLES = 3


@dataclass(frozen=True)
class TimingComparison:
    """Medians and spreads (max - min) of two sets of timings (ms) and whether ``fast`` measurably wins.

    Invariant: ``measured`` implies ``saved_ms > 0`` and ``speedup > 1``; otherwise both are None."""

    slow_ms: tuple[float, ...]
    fast_ms: tuple[float, ...]
    slow_median_ms: float
    fast_median_ms: float
    slow_spread_ms: float
    fast_spread_ms: float
    win_share: float
    measured: bool

    @property
    def saved_ms(self) -> float | None:
        """Median slow minus median fast, only when the difference is measured."""
        return self.slow_median_ms - self.fast_median_ms if self.measured else None

    @property
    def speedup(self) -> float | None:
        """Median slow / median fast, only when the difference is measured."""
        return self.slow_median_ms / self.fast_median_ms if self.measured else None

    def as_dict(self) -> dict[str, object]:
        r = lambda x: None if x is None else round(x, 3)  # noqa: E731
        return {
            "slow_median_ms": r(self.slow_median_ms), "fast_median_ms": r(self.fast_median_ms),
            "slow_spread_ms": r(self.slow_spread_ms), "fast_spread_ms": r(self.fast_spread_ms),
            "samples": len(self.slow_ms), "win_share": r(self.win_share), "measured": self.measured,
            "saved_ms": r(self.saved_ms), "speedup": r(self.speedup),
        }


def win_share(fast: Sequence[float], slow: Sequence[float]) -> float:
    """P(a random ``fast`` sample < a random ``slow`` one), ties counted half."""
    if not fast or not slow:
        return 0.0
    wins = sum(1.0 if f < s else 0.5 if f == s else 0.0 for f in fast for s in slow)
    return wins / (len(fast) * len(slow))


def compare_samples(slow_ms: Sequence[float], fast_ms: Sequence[float]) -> TimingComparison:
    """Compare timings of the slow path (e.g. a full prefill) with the fast one (prefill on reused K/V)."""
    slow, fast = tuple(float(x) for x in slow_ms), tuple(float(x) for x in fast_ms)
    if not slow or not fast:
        raise ValueError("compare_samples needs at least one sample on each side")
    slow_med, fast_med = statistics.median(slow), statistics.median(fast)
    share = win_share(fast, slow)
    measured = (min(len(slow), len(fast)) >= MIN_SAMPLES and fast_med > 0 and fast_med < slow_med
                and share >= MIN_WIN_SHARE)
    return TimingComparison(slow, fast, slow_med, fast_med, max(slow) - min(slow), max(fast) - min(fast),
                            share, measured)
