"""A burst of concurrent requests of the three kinds a serving engine batches, sent to the engine loop:
prefills from scratch, prompts whose prefix is cached (their tails computed), and the decode steps that
follow. They are admitted between the same two steps, and the result is the engine's own StepRecords of
the steps that held at least one of them (measured, as the engine recorded them)."""

from __future__ import annotations

import secrets
from collections.abc import Sequence
from dataclasses import dataclass

from kvviz.engine import EngineLoop, RequestOutput, SamplingParams, StepRecord

BURST_PREFIX = "burst"


@dataclass(frozen=True)
class BurstResult:
    """The burst's request ids (``prefix`` + index), their final outputs and the steps they ran in."""

    prefix: str
    outputs: list[RequestOutput]
    steps: list[StepRecord]

    @property
    def requests(self) -> int:
        return len(self.outputs)

    @property
    def shared(self) -> int:
        """Steps of the burst that held more than one request."""
        return sum(1 for s in self.steps if s.num_requests > 1)


def run_burst(loop: EngineLoop, token_ids: Sequence[list[int]], cached: list[int], new_tokens: int = 8,
              owner: str = "") -> BurstResult:
    """Run ``cached`` (one token) so its blocks are in the prefix cache, then submit every prompt of
    ``token_ids`` at once, each generating ``new_tokens`` greedy tokens; wait for all of them."""
    prefix = f"{BURST_PREFIX}-{owner or secrets.token_hex(4)}-{secrets.token_hex(3)}-"
    loop.submit(prefix + "cache", cached, SamplingParams(max_tokens=1), client="batching").result()
    first = loop.read(lambda e: e.steps[-1].step if e.steps else -1)
    params = SamplingParams(max_tokens=new_tokens, ignore_eos=True)
    streams = loop.submit_many([(f"{prefix}{i}", list(ids), params) for i, ids in enumerate(token_ids)],
                               client="batching")
    outputs = [s.result() for s in streams]
    steps = loop.read(lambda e: [s for s in e.steps if s.step > first])
    mine = [s for s in steps if any(i.request_id.startswith(prefix) for i in s.items)]
    return BurstResult(prefix, outputs, mine)
