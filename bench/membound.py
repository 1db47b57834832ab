"""The memory bound of one decode step: the time to read every weight's bytes once (a sum over each
parameter tensor of the embedded model, fp32), the floor under one stream's time per output token.

Invariant: each tensor is read whole exactly once per timing; the figure is the median of ``runs`` timings
in this process, with torch's current thread count.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class WeightRead:
    """Median milliseconds to read ``nbytes`` once, with ``threads`` torch threads, and the runs."""

    ms: float
    nbytes: int
    threads: int
    runs: list[float]

    @property
    def gb_s(self) -> float:
        return self.nbytes / (self.ms / 1000.0) / 1e9


def weight_tensors():
    """The embedded model's parameters as fp32 tensors, each stored once (a tied LM head is the embedding)."""
    from safetensors.torch import load_file

    from kvviz.model.embedded import embedded_cache_paths

    tensors = load_file(str(embedded_cache_paths()[1] / "model.safetensors"))
    return [t.float().contiguous() for t in tensors.values()]


def weight_read(runs: int = 7, tensors=None) -> WeightRead:
    """Time one pass over every weight (``tensor.sum()`` each), ``runs`` times after a warm-up; the median."""
    import torch

    tensors = weight_tensors() if tensors is None else tensors
    nbytes = sum(t.numel() * t.element_size() for t in tensors)

    def one() -> float:
        start = time.perf_counter()
        with torch.inference_mode():
            sums = [t.sum() for t in tensors]  # each [rows, cols] or [n] tensor read once, a 0-d sum each
        float(torch.stack(sums).sum())
        return (time.perf_counter() - start) * 1000.0

    one()
    times = [one() for _ in range(runs)]
    return WeightRead(round(statistics.median(times), 2), nbytes, torch.get_num_threads(),
                      [round(x, 2) for x in times])
