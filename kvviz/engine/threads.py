"""How many torch compute threads each engine step of a serving loop runs on (``StepThreads``).

On a small CPU a serving process has two kinds of work: the step's compute (OpenMP threads) and the API
server's Python (HTTP, SSE chunks, the pages). vLLM 0.33.0 on a CPU (``vllm/utils/ompmultiprocessing.py``,
``VLLM_CPU_OMP_THREADS_BIND=auto``) binds its compute threads to all cores but one and keeps that core for
its API process. kvviz keeps the core only where it pays: a small step (a few decode tokens) reads the
weights once whatever the thread count, so one thread fewer leaves a core to the server at almost no cost,
while a prefill is compute-bound and gets every thread. Invariant: an explicit thread count
(``OMP_NUM_THREADS`` or ``KVVIZ_STEP_THREADS``) runs every step on exactly that many threads.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvviz.settings import Settings, settings

#: A step of at most this many scheduled tokens is "small": it leaves one core to the API server.
SMALL_STEP_TOKENS = 8


@dataclass(frozen=True)
class ThreadPolicy:
    """``full`` threads for a step, ``small`` for one of at most ``small_tokens`` scheduled tokens."""

    full: int
    small: int
    small_tokens: int = SMALL_STEP_TOKENS

    def threads_for(self, num_tokens: int) -> int:
        return self.small if num_tokens <= self.small_tokens else self.full


def default_policy(env: Settings | None = None, torch_threads: int | None = None,
                   spare_a_core: bool = True) -> ThreadPolicy:
    """The policy for this process: ``KVVIZ_STEP_THREADS`` or ``OMP_NUM_THREADS`` fix the count for every
    step; otherwise torch's count (one per core) for large steps and, with ``spare_a_core`` (an engine
    stepped beside pages in its own thread), one fewer (at least 1) for small ones. ``kvviz serve`` steps in
    its main thread, where OpenMP's threads spin between regions, and spares none: one stream through its
    API decoded 36-41 tok/s with a spare core, 43-48 without (two cores, interleaved)."""
    env = env or settings()
    full = torch_threads if torch_threads is not None else torch.get_num_threads()
    if env.step_threads is not None:
        return ThreadPolicy(env.step_threads, env.step_threads, SMALL_STEP_TOKENS)
    if env.omp_num_threads_set or not spare_a_core:
        return ThreadPolicy(full, full, SMALL_STEP_TOKENS)
    return ThreadPolicy(full, max(1, full - 1), SMALL_STEP_TOKENS)


class StepThreads:
    """Applies a ``ThreadPolicy`` before each step (``torch.set_num_threads`` only when the count changes)."""

    def __init__(self, policy: ThreadPolicy) -> None:
        self.policy = policy
        self.initial = self.current = torch.get_num_threads()

    def before_step(self, num_tokens: int) -> int:
        n = self.policy.threads_for(num_tokens)
        self._use(n)
        return n

    def restore(self) -> None:
        """Back to the count found at the start (the loop closed: the process's other torch work gets it)."""
        self._use(self.initial)

    def _use(self, n: int) -> None:
        if n != self.current:
            torch.set_num_threads(n)
            self.current = n
