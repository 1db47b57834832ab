"""Where a KV-aware router would send a prompt: the scorers of llm-d and NVIDIA Dynamo, and round-robin,
over what each replica holds of the prompt's leading blocks (pure: no sockets, no clocks).

- ``longest_prefix`` (llm-d, ``llm-d-kv-cache`` ``pkg/kvcache/kvblock_scorer.go``, ``LongestPrefixScorer``):
  walk the prompt's blocks from block 0; a replica scores while it holds every block so far, adding per
  block the highest weight among the media it holds that block on (``backend.go`` defaults: GPU 1.0,
  CPU 0.8; a medium without a weight counts 1.0). The highest score wins.
- ``overlap_cost`` (Dynamo, ``lib/llm/src/kv_router/scheduler.rs``, ``DefaultWorkerSelector``):
  ``logit = overlap_score_weight x potential_prefill_blocks + potential_active_blocks``, where the prefill
  blocks are the prompt's tokens not covered by the replica's overlap (leading blocks held, any medium)
  divided by the block size, and the active blocks are the replica's decode load plus the prompt's blocks.
  The lowest logit wins (router temperature 0: no sampling).
- ``round_robin``: the next replica in order, whatever it caches.

Ties go to the replica listed first (llm-d's picker and Dynamo's sampler break ties their own way; kvviz
keeps the choice reproducible). Only live (not stale) replicas are candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# llm-d's default tier weights (KVCacheBackendConfig), keyed by vLLM's medium names.
LLMD_MEDIUM_WEIGHTS: dict[str, float] = {"GPU": 1.0, "CPU": 0.8}
UNKNOWN_MEDIUM_WEIGHT = 1.0  # llm-d: a tier missing from the weight map counts 1.0
DYNAMO_OVERLAP_WEIGHT = 1.0  # Dynamo's --kv-overlap-score-weight default
SCORERS = ("longest_prefix", "overlap_cost", "round_robin")


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """One replica as the router sees it for a prompt: for each of the prompt's full blocks the media it
    holds that block on (empty: not held), its decode load in blocks, and whether it may be chosen."""

    name: str
    held: tuple[frozenset[str], ...]
    load_blocks: int = 0
    live: bool = True

    @property
    def prefix_blocks(self) -> int:
        """Leading blocks held on any medium (the hit the engine would get)."""
        n = 0
        while n < len(self.held) and self.held[n]:
            n += 1
        return n


@dataclass(frozen=True, slots=True)
class ReplicaScore:
    """The scorers' numbers for one replica."""

    name: str
    live: bool
    prefix_blocks: int
    longest_prefix: float  # llm-d's weighted score
    prefill_blocks: float  # Dynamo's potential_prefill_blocks
    active_blocks: int  # Dynamo's potential_active_blocks
    overlap_cost: float  # Dynamo's logit (lower is better)


@dataclass(frozen=True, slots=True)
class Route:
    """Every replica's scores and each scorer's pick (None when no replica is live)."""

    scores: tuple[ReplicaScore, ...]
    picks: dict[str, str | None]


def medium_weight(medium: str, weights: Mapping[str, float] = LLMD_MEDIUM_WEIGHTS) -> float:
    """llm-d's weight of one medium (case-insensitive; unknown media count ``UNKNOWN_MEDIUM_WEIGHT``)."""
    return weights.get(medium.upper(), UNKNOWN_MEDIUM_WEIGHT)


def longest_prefix_score(replica: ReplicaView, weights: Mapping[str, float] = LLMD_MEDIUM_WEIGHTS) -> float:
    """llm-d's score: the sum over the leading run of held blocks of each block's best medium weight."""
    score = 0.0
    for media in replica.held:
        if not media:
            break
        score += max(medium_weight(m, weights) for m in media)
    return score


def overlap_cost(replica: ReplicaView, prompt_tokens: int, block_size: int,
                 overlap_weight: float = DYNAMO_OVERLAP_WEIGHT) -> tuple[float, float, int]:
    """Dynamo's ``(logit, potential_prefill_blocks, potential_active_blocks)`` for sending the prompt here."""
    new_tokens = max(prompt_tokens - replica.prefix_blocks * block_size, 0)
    prefill_blocks = new_tokens / block_size
    active_blocks = replica.load_blocks + -(-prompt_tokens // block_size)
    return overlap_weight * prefill_blocks + active_blocks, prefill_blocks, active_blocks


def _first_best(values: Sequence[tuple[str, float]], lowest: bool) -> str | None:
    best: tuple[str, float] | None = None
    for name, value in values:
        if best is None or (value < best[1] if lowest else value > best[1]):
            best = (name, value)
    return None if best is None else best[0]


def route(replicas: Sequence[ReplicaView], prompt_tokens: int, block_size: int, *, turn: int = 0,
          weights: Mapping[str, float] = LLMD_MEDIUM_WEIGHTS,
          overlap_weight: float = DYNAMO_OVERLAP_WEIGHT) -> Route:
    """Score every replica and pick one per scorer among the live ones; ``turn`` is how many prompts
    round-robin has placed before this one."""
    scores = []
    for r in replicas:
        logit, prefill, active = overlap_cost(r, prompt_tokens, block_size, overlap_weight)
        scores.append(ReplicaScore(r.name, r.live, r.prefix_blocks, longest_prefix_score(r, weights), prefill,
                                   active, logit))
    live = [s for s in scores if s.live]
    picks = {
        "longest_prefix": _first_best([(s.name, s.longest_prefix) for s in live], lowest=False),
        "overlap_cost": _first_best([(s.name, s.overlap_cost) for s in live], lowest=True),
        "round_robin": live[turn % len(live)].name if live else None,
    }
    return Route(tuple(scores), picks)
