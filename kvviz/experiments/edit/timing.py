"""Timing an edit on the engine: B computed in full against B on its reused prefix, several times each.

One timing per side is noise on a busy CPU (a 28-token edit once read "-137 ms saved"). Each sample is one
engine request, and only its compute counts (first scheduled step to first token); the time it waited in
the engine's queue is kept apart (``wait_ms``). The full side is B under a fresh cache salt, so nothing is
cached and the engine recomputes every token. The reuse side is B under another fresh salt after the
prefix B shares with A (its reused full blocks) was sent under that salt, so the engine reuses exactly
those blocks and computes the rest. The sides alternate ``repeats`` times (fewer, but at least
``MIN_SAMPLES``, once ``budget_s`` is spent) and ``kvviz.analysis.timing_compare.compare_samples`` decides
whether the difference is measurable or within the noise.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kvviz.analysis.timing_compare import MIN_SAMPLES, TimingComparison, compare_samples
from kvviz.experiments.edit.engine_run import EngineRequestRun, fresh_salt, run_prompt

if TYPE_CHECKING:  # types only: no torch or engine import at run time
    from kvviz.engine import EngineLoop

#: Timed requests per side.
REPEATS = 3
#: Stop adding runs (after MIN_SAMPLES per side) once this much wall time went into timing.
BUDGET_S = 3.0


@dataclass(frozen=True)
class EditTiming:
    """The samples of both sides, their comparison, the waits kept apart, and the first full run's
    logits (the uncached reference the reused B is compared with)."""

    comparison: TimingComparison
    full_wait_ms: tuple[float, ...]
    reuse_wait_ms: tuple[float, ...]
    reuse_cached_tokens: tuple[int, ...]  # the engine's reused count in each reuse sample
    full_cached_tokens: tuple[int, ...]  # 0 in each full sample (a fresh salt)
    full_next_token_id: int
    full_logits: np.ndarray | None = field(default=None, repr=False, compare=False)

    @property
    def median_wait_ms(self) -> float:
        return statistics.median(self.full_wait_ms + self.reuse_wait_ms)


def time_edit(loop: EngineLoop, ids_b: Sequence[int], reused_tokens: int, repeats: int = REPEATS,
              budget_s: float = BUDGET_S) -> EditTiming | None:
    """Samples of B computed in full and of B on its first ``reused_tokens`` tokens cached; None when
    nothing is reused (there is no second side to time)."""
    ids = [int(t) for t in ids_b]
    if reused_tokens <= 0 or reused_tokens >= len(ids):
        return None
    prefix = ids[:reused_tokens]
    full: list[EngineRequestRun] = []
    reuse: list[EngineRequestRun] = []

    def run_full() -> None:
        full.append(run_prompt(loop, ids, fresh_salt(), logits=not full))

    def run_reuse() -> None:
        salt = fresh_salt()
        run_prompt(loop, prefix, salt)  # caches the shared blocks under this salt (not timed)
        reuse.append(run_prompt(loop, ids, salt))

    start = time.perf_counter()
    for i in range(max(repeats, MIN_SAMPLES)):
        # alternate which side goes first, so a drift in machine load hits both alike
        for step in ((run_full, run_reuse) if i % 2 == 0 else (run_reuse, run_full)):
            step()
        if i + 1 >= MIN_SAMPLES and time.perf_counter() - start > budget_s:
            break
    return EditTiming(
        comparison=compare_samples([r.compute_ms for r in full], [r.compute_ms for r in reuse]),
        full_wait_ms=tuple(r.wait_ms for r in full),
        reuse_wait_ms=tuple(r.wait_ms for r in reuse),
        reuse_cached_tokens=tuple(r.num_cached_tokens for r in reuse),
        full_cached_tokens=tuple(r.num_cached_tokens for r in full),
        full_next_token_id=full[0].next_token_id,
        full_logits=full[0].logits,
    )
