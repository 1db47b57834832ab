"""The room's hit/miss timing comparison: compute per 100 prompt tokens of recent prompts, with its spread and
a verdict code. It never states "hits are slower" as a fact: an inverted order is the machine's noise or load."""

from __future__ import annotations

import os
import statistics
from collections.abc import Iterable
from dataclasses import dataclass

PER_TOKENS = 100  # the unit: compute ms per this many prompt tokens
WINDOW_S = 120.0  # only prompts this close in time are compared
MIN_RUNS = 3  # per side, for a verdict
BUSY_LOAD_PER_CORE = 1.5  # 1-minute load average per core at which timings are not comparable


@dataclass(frozen=True)
class TimingSample:
    """One admitted prompt's prefill: its share of the engine steps that computed it, its length, when."""

    hit: bool
    compute_ms: float
    num_tokens: int
    at: float


@dataclass(frozen=True)
class Spread:
    """Median and quartiles of compute ms per ``PER_TOKENS`` prompt tokens over ``n`` prompts."""

    n: int
    median: float
    p25: float
    p75: float


@dataclass(frozen=True)
class HitMissComparison:
    """Recent hits vs misses, like with like. ``verdict``: ``faster`` (hits' quartile range wholly below the
    misses'), ``noise`` (the ranges overlap), ``inverted`` (hits' wholly above: not physics, noise or a changed
    machine), ``busy`` (the machine's load makes times incomparable), ``too_few`` (under ``MIN_RUNS`` a side)."""

    hit: Spread | None
    miss: Spread | None
    verdict: str
    load_per_core: float | None
    window_s: float


def machine_load_per_core() -> float | None:
    """The 1-minute load average per CPU core, or None where the OS does not report one."""
    try:
        return os.getloadavg()[0] / (os.cpu_count() or 1)
    except (AttributeError, OSError):
        return None


def _spread(per_token: list[float]) -> Spread | None:
    if not per_token:
        return None
    med = statistics.median(per_token)
    if len(per_token) == 1:
        return Spread(1, med, med, med)
    p25, _, p75 = statistics.quantiles(per_token, n=4, method="inclusive")
    return Spread(len(per_token), med, p25, p75)


def _verdict(hit: Spread | None, miss: Spread | None, load_per_core: float | None) -> str:
    if hit is None or miss is None or hit.n < MIN_RUNS or miss.n < MIN_RUNS:
        return "too_few"
    if load_per_core is not None and load_per_core >= BUSY_LOAD_PER_CORE:
        return "busy"
    if hit.p75 < miss.p25:
        return "faster"
    if hit.p25 > miss.p75:
        return "inverted"
    return "noise"


def compare_hit_miss(samples: Iterable[TimingSample], now: float, load_per_core: float | None,
                     window_s: float = WINDOW_S) -> HitMissComparison:
    """Hits vs misses among the prompts admitted in the last ``window_s`` before ``now``."""
    hits: list[float] = []
    misses: list[float] = []
    for s in samples:
        if now - s.at > window_s or s.num_tokens <= 0:
            continue
        (hits if s.hit else misses).append(s.compute_ms * PER_TOKENS / s.num_tokens)
    hit, miss = _spread(hits), _spread(misses)
    return HitMissComparison(hit, miss, _verdict(hit, miss, load_per_core), load_per_core, window_s)
