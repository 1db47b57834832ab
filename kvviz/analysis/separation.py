"""How well two latency samples separate: the Mann-Whitney AUC and the best single-threshold accuracy."""

from __future__ import annotations

from collections.abc import Sequence


def auc(fast: Sequence[float], slow: Sequence[float]) -> float:
    """P(a random ``fast`` sample < a random ``slow`` one), ties counted half (Mann-Whitney AUC)."""
    if not fast or not slow:
        return float("nan")
    wins = sum(1.0 if f < s else 0.5 if f == s else 0.0 for f in fast for s in slow)
    return wins / (len(fast) * len(slow))


def threshold_accuracy(fast: Sequence[float], slow: Sequence[float]) -> float:
    """Best share of samples a single latency threshold labels correctly (fast below, slow above)."""
    if not fast or not slow:
        return float("nan")
    best = 0.0
    for t in sorted({*fast, *slow, float("inf")}):
        right = sum(1 for f in fast if f < t) + sum(1 for s in slow if s >= t)
        best = max(best, right / (len(fast) + len(slow)))
    return best
