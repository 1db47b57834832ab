"""The engine's step records: what a step computed, per request (``StepItem``, ``StepRecord``, kept for the
timelines), and a step begun but not finished (``StepWork``, between ``begin_step`` and ``finish_step``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.engine.request import RequestOutput
from kvviz.engine.runner import SeqInput
from kvviz.engine.scheduler import ScheduledChunk, SchedulerOutput


@dataclass(frozen=True)
class StepItem:
    """One request's part of a step: ``num_tokens`` computed from position ``start`` (the ``start`` tokens
    before them were read from its blocks, computed earlier or hit in the prefix cache). ``kind``:
    ``decode`` (one token after the prompt), ``cached`` (a prompt's tail after a prefix-cache hit) or
    ``scratch`` (a prompt with no prefix-cache hit; its later chunks read its own earlier ones)."""

    request_id: str
    client: str
    kind: str
    start: int
    num_tokens: int
    num_cached_tokens: int


@dataclass(frozen=True)
class StepRecord:
    """What one step computed, for the timelines (engine view, batching page): measured wall time of the
    step (schedule, forward, sampling, stop checks) and each request's part of it."""

    step: int
    prefill_tokens: int
    decode_tokens: int
    num_requests: int
    preempted: tuple[str, ...]
    duration_s: float
    started_at: float = 0.0  # time.time() when the step began
    items: tuple[StepItem, ...] = ()


@dataclass
class StepWork:
    """A begun step: its schedule, what the forward pass computes, outputs already due (aborts), and when
    it began (``time.time()`` and ``time.monotonic()``)."""

    plan: SchedulerOutput
    seqs: list[SeqInput]
    outputs: list[RequestOutput]
    wall: float
    started: float


def step_kind(chunk: ScheduledChunk) -> str:
    """A scheduled chunk's ``StepItem.kind``: ``decode``, ``cached`` or ``scratch``."""
    if chunk.is_decode:
        return "decode"
    return "cached" if chunk.request.num_cached_tokens > 0 else "scratch"
