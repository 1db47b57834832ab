"""The memory bound of one decode step: the time to read every weight's bytes once (a sum over one flat copy of
the embedded model's parameters), the floor under one stream's time per output token.

Invariant: the copy holds each parameter once (a tied LM head is the embedding) and is read whole exactly once
per timing, in one reduction: a sum per tensor (272 calls) also timed waking the OpenMP team for each, which
under ``OMP_WAIT_POLICY=PASSIVE`` (the Makefile's) added about 8 ms to 12 ms of reading. The figure is the median
of ``runs`` timings in this process, with torch's current thread count.
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
    """Time one pass over every weight (one ``sum`` of their flat copy), ``runs`` times after a warm-up; the
    median."""
    import torch

    tensors = weight_tensors() if tensors is None else tensors
    flat = torch.cat([t.reshape(-1) for t in tensors])  # [total parameters], the tensors' dtype
    nbytes = flat.numel() * flat.element_size()

    def one() -> float:
        start = time.perf_counter()
        with torch.inference_mode():
            float(flat.sum())  # every byte read once
        return (time.perf_counter() - start) * 1000.0

    one()
    times = [one() for _ in range(runs)]
    return WeightRead(round(statistics.median(times), 2), nbytes, torch.get_num_threads(),
                      [round(x, 2) for x in times])
