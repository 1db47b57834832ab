"""What one engine step adds to vLLM 0.33.0's Prometheus metrics (``vllm/v1/metrics/stats.py``'s
``IterationStats`` and ``FinishedRequestStats``), built by the engine as it samples.

Invariants (as vLLM's): a request's prompt counts once, in the step that gives its first token, split into
computed and cached tokens by its first scheduling (a preempted request's recompute is not counted again);
a step that gives no output token is not observed; a request the client aborts is not a finished request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvviz.engine.request import Request


@dataclass(frozen=True)
class FinishedRequestStats:
    """One request that finished in the engine (stop or length): its intervals in seconds and counts.
    Intervals follow vLLM's phases: queued = arrival to first scheduled, prefill = first scheduled to first
    token, decode = first to last token, inference = first scheduled to last token (preemptions inside)."""

    finish_reason: str
    e2e_s: float
    queued_s: float
    prefill_s: float
    decode_s: float
    inference_s: float
    mean_time_per_output_token_s: float  # decode_s / (tokens - 1); 0 with one token, as vLLM
    num_prompt_tokens: int
    num_cached_tokens: int
    num_generation_tokens: int
    num_preemptions: int
    max_tokens_param: int


@dataclass
class IterationStats:
    """One step's outputs, as vLLM's ``IterationStats``: tokens, first-token and inter-token latencies
    and the requests that finished (stop or length)."""

    num_generation_tokens: int = 0
    num_prompt_tokens: int = 0  # prompts whose first token came in this step
    num_prompt_computed: int = 0  # ... the part of them the engine computed
    num_prompt_cached: int = 0  # ... the part read from the prefix cache
    ttfts_s: list[float] = field(default_factory=list)
    itls_s: list[float] = field(default_factory=list)
    finished: list[FinishedRequestStats] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        """vLLM's ``iteration_tokens_total`` observation: computed prompt tokens + generated tokens."""
        return self.num_prompt_computed + self.num_generation_tokens

    def observe_token(self, req: Request, previous_token_time: float | None, now: float) -> None:
        """One token sampled for ``req`` at ``now``; ``previous_token_time`` its last token's time (None
        before its first)."""
        self.num_generation_tokens += 1
        if previous_token_time is None:
            cached = max(req.num_cached_tokens, 0)
            self.num_prompt_tokens += req.num_prompt_tokens
            self.num_prompt_cached += cached
            self.num_prompt_computed += req.num_prompt_tokens - cached
            self.ttfts_s.append(now - req.metrics.arrival_time)
        else:
            self.itls_s.append(now - previous_token_time)

    def observe_finished(self, req: Request, now: float) -> None:
        """``req`` finished (stop or length) at ``now``, after its last token."""
        m = req.metrics
        n = len(req.output_token_ids)
        decode = m.decode_s or 0.0
        self.finished.append(FinishedRequestStats(
            req.finish_reason or "", now - m.arrival_time, m.engine_queue_s or 0.0, m.prefill_s or 0.0, decode,
            m.inference_s or 0.0, decode / (n - 1) if n > 1 else 0.0, req.num_prompt_tokens,
            max(req.num_cached_tokens, 0), n, req.num_preemptions, req.sampling_params.max_tokens))


__all__ = ["FinishedRequestStats", "IterationStats"]
