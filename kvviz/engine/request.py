"""Request (the engine's record of one generation), its status and metrics, and what a step returns.

Invariant: ``num_computed_tokens`` counts the leading tokens of ``all_token_ids`` whose K/V are in the
request's blocks (after the step that scheduled them); it drops to 0 on preemption (recompute).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

import torch

from kvviz.engine.capture import CapturedKV
from kvviz.engine.sampling import SamplingParams, TokenLogprob
from kvviz.mirror.hashing import BlockHash


class RequestStatus(StrEnum):
    WAITING = "waiting"
    RUNNING = "running"
    PREEMPTED = "preempted"
    FINISHED = "finished"


@dataclass
class RequestMetrics:
    """Times (``time.monotonic`` seconds) of a request's life and the intervals derived from them; as
    vLLM 0.33.0's ``RequestStateStats``: arrival (the caller got it), queued (the engine added it), first
    scheduled, first and last token."""

    arrival_time: float
    first_scheduled_time: float | None = None
    first_token_time: float | None = None
    last_token_time: float | None = None
    finished_time: float | None = None
    num_output_tokens: int = 0
    queued_time: float | None = None  # added to the engine (after arrival: a submit waits for a running step)
    compute_share_s: float = 0.0  # sum over its steps of step time x its share of the step's tokens
    max_step_requests: int = 0  # the most requests any of its steps computed (1: it ran alone)

    @property
    def queue_wait_s(self) -> float | None:
        """Arrival to first scheduled step."""
        return None if self.first_scheduled_time is None else self.first_scheduled_time - self.arrival_time

    @property
    def ttft_s(self) -> float | None:
        """Arrival to the first output token."""
        return None if self.first_token_time is None else self.first_token_time - self.arrival_time

    @property
    def tpot_s(self) -> float | None:
        """Mean time between output tokens after the first (None with fewer than 2)."""
        if self.first_token_time is None or self.last_token_time is None or self.num_output_tokens < 2:
            return None
        return (self.last_token_time - self.first_token_time) / (self.num_output_tokens - 1)

    @property
    def engine_queue_s(self) -> float | None:
        """Added to the engine to first scheduled (vLLM's ``request_queue_time``)."""
        if self.first_scheduled_time is None:
            return None
        start = self.queued_time if self.queued_time is not None else self.arrival_time
        return self.first_scheduled_time - start

    @property
    def prefill_s(self) -> float | None:
        """First scheduled step to the first output token (vLLM's prefill phase; preemptions inside)."""
        if self.first_scheduled_time is None or self.first_token_time is None:
            return None
        return self.first_token_time - self.first_scheduled_time

    @property
    def decode_s(self) -> float | None:
        """First to last output token (vLLM's decode phase)."""
        if self.first_token_time is None or self.last_token_time is None:
            return None
        return self.last_token_time - self.first_token_time

    @property
    def inference_s(self) -> float | None:
        """First scheduled step to the last output token (vLLM's running phase)."""
        if self.first_scheduled_time is None or self.last_token_time is None:
            return None
        return self.last_token_time - self.first_scheduled_time

    @property
    def e2e_s(self) -> float | None:
        """Arrival to finish."""
        return None if self.finished_time is None else self.finished_time - self.arrival_time

    def as_dict(self) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {k: getattr(self, k) for k in self.__dataclass_fields__}
        for k in ("queue_wait_s", "ttft_s", "tpot_s", "e2e_s", "engine_queue_s", "prefill_s", "decode_s",
                  "inference_s"):
            out[k] = getattr(self, k)
        return out


@dataclass
class Request:
    """One generation: prompt, sampling, output so far, scheduling state (vLLM v1's ``Request``)."""

    request_id: str
    prompt_token_ids: list[int]
    sampling_params: SamplingParams
    arrival_time: float
    block_hashes: list[BlockHash]  # chain of the prompt's full blocks (hashed once, by the manager's hasher)
    cache_salt: str | None = None
    priority: int = 0
    client: str = ""
    output_token_ids: list[int] = field(default_factory=list)
    status: RequestStatus = RequestStatus.WAITING
    num_computed_tokens: int = 0
    num_cached_tokens: int = -1  # vLLM: set when first scheduled, -1 before (device + host tier)
    num_cached_tokens_host: int = 0  # the part of it copied back from the host tier (vLLM's external tokens)
    num_preemptions: int = 0
    finish_reason: str | None = None
    generator: torch.Generator | None = None
    text: str = ""  # output text so far (stop strings cut)
    sent_text_len: int = 0
    sent_tokens: int = 0
    logprobs: list[TokenLogprob] = field(default_factory=list)  # one per output token, when asked for
    stop_reason: int | str | None = None  # the stop string or stop token id that finished it (vLLM's)
    capture_kv: bool = False  # copy its K/V out of its blocks when it finishes, before they are freed
    captured_kv: CapturedKV | None = None
    metrics: RequestMetrics = field(init=False)

    def __post_init__(self) -> None:
        self.metrics = RequestMetrics(self.arrival_time)

    @property
    def num_prompt_tokens(self) -> int:
        return len(self.prompt_token_ids)

    @property
    def num_tokens(self) -> int:
        return len(self.prompt_token_ids) + len(self.output_token_ids)

    @property
    def all_token_ids(self) -> list[int]:
        return self.prompt_token_ids + self.output_token_ids

    @property
    def is_finished(self) -> bool:
        return self.status is RequestStatus.FINISHED


@dataclass
class RequestOutput:
    """What one step produced for one request (vLLM's ``RequestOutput``, flattened to one completion)."""

    request_id: str
    new_token_ids: list[int]
    token_ids: list[int]
    text: str
    delta_text: str
    finished: bool
    finish_reason: str | None
    num_prompt_tokens: int
    num_cached_tokens: int
    num_preemptions: int
    metrics: RequestMetrics
    logits: torch.Tensor | None = None  # [vocab] float32 on the CPU, when SamplingParams.return_logits
    logprobs: list[TokenLogprob] | None = None  # one per token of ``token_ids``, when SamplingParams.logprobs
    stop_reason: int | str | None = None  # the matched stop string or stop token id; None for EOS or length
    num_cached_tokens_host: int = 0  # of num_cached_tokens, copied back from the host tier
    kv: CapturedKV | None = None  # its finished K/V, when added with capture_kv (``kvviz.engine.capture``)

    @property
    def cached_tokens_by_source(self) -> dict[str, int]:
        """``num_cached_tokens`` by the tier that supplied it (vLLM 0.33.0's ``CacheHitSource`` values)."""
        return {"device": self.num_cached_tokens - self.num_cached_tokens_host, "host": self.num_cached_tokens_host}


@dataclass(frozen=True)
class EngineStats:
    """vLLM's scheduler and prefix-cache counters (``SchedulerStats``, ``PrefixCacheStats``), totals
    since start; prefix-cache queries and hits are tokens, counted when a request is first scheduled
    (preempted requests' re-lookups apart, as vLLM does); a prompt's tokens count at its first output token."""

    num_running: int
    num_waiting: int
    num_preemptions: int
    kv_cache_usage: float
    prefix_cache_queries: int
    prefix_cache_hits: int
    num_blocks: int
    block_size: int
    kv_cache_bytes: int
    prompt_tokens_total: int
    generation_tokens_total: int
    requests_finished_total: int
    preempted_prefix_cache_queries: int = 0
    preempted_prefix_cache_hits: int = 0
    num_steps: int = 0
    requests_aborted_total: int = 0
    prompt_tokens_cached_total: int = 0  # prompt tokens read from the prefix cache, counted with prompt_tokens_total
    # the host tier (0 when off): vLLM's external_prefix_cache_* counters, its hits by source "host" at first
    # admission, and the prompt tokens of prompt_tokens_cached_total that came from it
    external_prefix_cache_queries: int = 0
    external_prefix_cache_hits: int = 0
    prefix_cache_hits_host: int = 0
    prompt_tokens_cached_host_total: int = 0
    host_kv_blocks: int = 0
    host_kv_usage: float = 0.0

    def as_dict(self) -> dict[str, float | int]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}
