"""A timed probe on the engine, alone: the side channel's measurement.

``run_alone`` waits until the engine has no unfinished request, then, between two steps and holding the
engine loop's lock (so no other request can be added), adds the probe and steps the engine itself until
the probe's prefill has produced its first token (``max_tokens=1``). Only those steps are timed: the
compute of the probe's prefill (schedule, forward pass, sampling) with no other request in them; the wait
for a quiet engine is reported apart and never part of the measurement.
"""

from __future__ import annotations

import secrets
import time
from dataclasses import dataclass

from kvviz.engine import EngineLoop, LLMEngine, RequestOutput, SamplingParams
from kvviz.errors import CodedError

PROBE_PARAMS = SamplingParams(max_tokens=1)
PROBE_CLIENT = "side channel"
#: Longest wait for a quiet engine before a probe gives up.
QUIET_TIMEOUT_S = 120.0


@dataclass(frozen=True)
class ProbeTiming:
    """One probe: ``compute_ms`` (its engine steps alone, timed), ``waited_ms`` (for a quiet engine, not
    timed as compute), the engine's ``cached_tokens`` and the tokens it computed."""

    compute_ms: float
    waited_ms: float
    cached_tokens: int
    num_tokens: int

    @property
    def computed_tokens(self) -> int:
        return self.num_tokens - self.cached_tokens


def run_alone(loop: EngineLoop, token_ids: list[int], *, cache_salt: str | None = None,
              timeout_s: float = QUIET_TIMEOUT_S) -> ProbeTiming:
    """Prefill ``token_ids`` on the engine with no other request in its steps (module docstring).
    CodedError ``engine_busy`` when the engine is never quiet within ``timeout_s``; the engine's own
    CodedErrors for a bad prompt."""
    request_id = f"probe-{secrets.token_hex(6)}"
    start = time.perf_counter()
    deadline = start + timeout_s
    while True:
        waited = time.perf_counter() - start
        done = loop.call(lambda engine: _step_alone(engine, request_id, token_ids, cache_salt))
        if done is not None:
            out, seconds = done
            return ProbeTiming(round(seconds * 1000.0, 3), round(waited * 1000.0, 3), out.num_cached_tokens,
                               out.num_prompt_tokens)
        left = deadline - time.perf_counter()
        if left <= 0:
            raise CodedError(f"the engine stayed busy for {timeout_s:.0f} s: no quiet moment to time a probe",
                             "engine_busy", seconds=round(timeout_s))
        loop.wait_idle(min(left, 1.0))


def _step_alone(engine: LLMEngine, request_id: str, token_ids: list[int],
                cache_salt: str | None) -> tuple[RequestOutput, float] | None:
    """Under the loop's lock: None when another request is unfinished; else the probe's final output and
    the seconds of the steps that ran it."""
    if engine.has_unfinished_requests():
        return None
    engine.add_request(request_id, list(token_ids), PROBE_PARAMS, cache_salt=cache_salt, client=PROBE_CLIENT)
    out: RequestOutput | None = None
    start = time.perf_counter()
    try:
        while out is None:
            out = next((o for o in engine.step() if o.request_id == request_id and o.finished), None)
        return out, time.perf_counter() - start
    finally:
        if out is None:  # a failed step: free its blocks, drain the abort's output
            engine.abort_request(request_id)
            engine.step()
