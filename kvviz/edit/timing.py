"""Timing the edit's two prefills several times: B from scratch vs B on top of its reused prefix.

One timing per side is noise on a busy CPU (a 28-token edit once read "-137 ms saved"). The two sides
are timed alternately, ``repeats`` times each (fewer, but at least ``MIN_SAMPLES``, once ``budget_s``
is spent), and ``kvviz.sim.timing_compare.compare_samples`` decides whether the difference is
measurable. Both sides time the model's forward pass only.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import prefill, prefill_continue
from kvviz.sim.timing_compare import MIN_SAMPLES, TimingComparison, compare_samples

#: Timed runs per side.
REPEATS = 5
#: Stop adding runs (after MIN_SAMPLES per side) once this much wall time went into timing.
BUDGET_S = 4.0


def time_full_vs_reuse(lm: LoadedModel, ids: Sequence[int], keys: Sequence[torch.Tensor],
                       values: Sequence[torch.Tensor], reused_tokens: int, repeats: int = REPEATS,
                       budget_s: float = BUDGET_S) -> TimingComparison | None:
    """Samples of a full prefill of ``ids`` (slow side) and of its continuation on the first
    ``reused_tokens`` positions of ``keys``/``values`` (fast side); None when nothing is reused."""
    ids = [int(t) for t in ids]
    if reused_tokens <= 0 or reused_tokens >= len(ids):
        return None
    prefix_k = [k[:, :reused_tokens] for k in keys]
    prefix_v = [v[:, :reused_tokens] for v in values]
    full: list[float] = []
    reuse: list[float] = []

    def run_full() -> None:
        full.append(prefill(lm, token_ids=ids, max_tokens=len(ids)).prefill_ms)

    def run_reuse() -> None:
        reuse.append(prefill_continue(lm, prefix_k, prefix_v, ids).prefill_ms)

    start = time.perf_counter()
    for i in range(max(repeats, MIN_SAMPLES)):
        # alternate which side goes first, so a drift in machine load hits both alike
        for step in ((run_full, run_reuse) if i % 2 == 0 else (run_reuse, run_full)):
            step()
        if i + 1 >= MIN_SAMPLES and time.perf_counter() - start > budget_s:
            break
    return compare_samples(full, reuse)
