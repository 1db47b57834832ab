"""Several replicas and a router: replay a trace over N replicas, each with its own LRU cache of C blocks
(kvviz.analysis.workload.reuse_distance's rules: prefix run at lookup, touch tail first), under a routing policy.

Policies (one request at a time, in arrival order):

- ``round_robin``: replica i mod N.
- ``least_loaded``: the replica with the fewest queued prompt tokens (ties: fewest sent so far).
- ``prefix``: the replica holding the longest cached prefix of the request (llm-d's prefix scorer);
  ties by queued tokens.
- ``consistent_hash``: a hash ring (64 virtual nodes a replica) keyed by the request's first block, so
  one prefix always lands on one replica.

Queues: a replica's queue gains the prompt tokens it must prefill (prompt - hit) and drains at a fixed
rate, the one at which N replicas would be 80% busy prefilling the whole trace without hits (over its
timestamps, or one time unit a request without them). **Load imbalance** is the largest replica's share
of prefill tokens over the mean share (1 = even); **prefill tokens saved** = hit tokens.
"""

from __future__ import annotations

import bisect
import math
from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from kvviz.analysis.workload.columns import TraceColumns
from kvviz.analysis.workload.reuse_distance import touch_lru
from kvviz.analysis.workload.sample import block_hash, block_keys

POLICIES = ("round_robin", "least_loaded", "prefix", "consistent_hash")
UTILIZATION = 0.8
VNODES = 64
MAX_REPLICAS = 1024


@dataclass(frozen=True)
class RoutingResult:
    """One replay: policy, replicas, capacity per replica, hit and prompt tokens, per-replica prefill."""

    policy: str
    replicas: int
    capacity_blocks: int
    hit_tokens: int
    input_tokens: int
    prefill_per_replica: tuple[int, ...]

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0

    @property
    def load_imbalance(self) -> float:
        mean = sum(self.prefill_per_replica) / len(self.prefill_per_replica)
        return max(self.prefill_per_replica) / mean if mean > 0 else 1.0

    def as_dict(self) -> dict:
        return {"policy": self.policy, "replicas": self.replicas, "capacity_blocks": self.capacity_blocks,
                "hit_rate": self.hit_rate, "prefill_tokens_saved": self.hit_tokens,
                "load_imbalance": self.load_imbalance}


def _run(cache: OrderedDict, blocks: list[int], cap: int) -> int:
    run = 0
    for b in blocks[:cap]:
        if b not in cache:
            break
        run += 1
    return run


def _ring(replicas: int) -> tuple[list[int], list[int]]:
    points = block_hash(np.arange(replicas * VNODES, dtype=np.int64), salt=7)
    order = np.argsort(points)
    return points[order].tolist(), (order // VNODES).tolist()


def route(cols: TraceColumns, replicas: int, capacity: int, policy: str) -> RoutingResult:
    """Replay ``cols`` over ``replicas`` LRU caches of ``capacity`` blocks each under ``policy``."""
    if policy not in POLICIES:
        raise ValueError(f"unknown routing policy {policy!r} (one of {', '.join(POLICIES)})")
    if not 1 <= replicas <= MAX_REPLICAS or capacity < 1:
        raise ValueError("replicas must be in 1..1024 and the capacity at least one block")
    caches: list[OrderedDict] = [OrderedDict() for _ in range(replicas)]
    queue = [0.0] * replicas
    sent = [0] * replicas
    bs = cols.block_size
    stamps = cols.timestamps if cols.has_timestamps else np.arange(cols.num_requests, dtype=np.float64)
    span = float(stamps[-1] - stamps[0]) if cols.num_requests > 1 else 1.0
    total = int(cols.input_tokens.sum())
    drain = total / (max(span, 1.0) * replicas * UTILIZATION)  # tokens per time unit per replica
    ring, owner = _ring(replicas) if policy == "consistent_hash" else ([], [])
    first_hash = block_hash(block_keys(cols), salt=11) if policy == "consistent_hash" else None
    hit_total, prev = 0, float(stamps[0]) if cols.num_requests else 0.0
    offsets, blocks_all = cols.offsets, cols.blocks
    for r in range(cols.num_requests):
        now = float(stamps[r])
        gone = drain * (now - prev)
        prev = now
        if gone > 0:
            queue = [max(0.0, q - gone) for q in queue]
        blocks = blocks_all[offsets[r]:offsets[r + 1]].tolist()
        cap, length = int(cols.lookup_blocks[r]), int(cols.input_tokens[r])
        if policy == "round_robin" or replicas == 1:
            k = r % replicas
        elif policy == "least_loaded":
            k = min(range(replicas), key=lambda i: (queue[i], sent[i], i))
        elif policy == "prefix":
            runs = [_run(c, blocks, cap) for c in caches]
            k = min(range(replicas), key=lambda i: (-runs[i], queue[i], sent[i], i))
        else:
            key = int(first_hash[blocks[0]]) if blocks else 0  # type: ignore[index]
            k = owner[bisect.bisect_left(ring, key) % len(ring)]
        cache = caches[k]
        hit = min(_run(cache, blocks, cap) * bs, length)
        hit_total += hit
        prefill = length - hit
        queue[k] += prefill
        sent[k] += prefill
        touch_lru(cache, blocks, capacity)
    return RoutingResult(policy, replicas, capacity, hit_total, total, tuple(sent))


def default_capacities(unique_blocks: int, replicas: int) -> list[int]:
    """Three per-replica capacities: the whole trace's distinct blocks split N ways, /4 and /16 of that."""
    top = max(1, math.ceil(unique_blocks / replicas))
    return sorted({max(1, top // 16), max(1, top // 4), top})


def routing_report(cols: TraceColumns, replicas: list[int], policies: list[str],
                   capacities: list[int] | None = None) -> dict:
    """The ``routing`` JSON section: one row per policy, N and capacity per replica."""
    rows: dict[str, list[dict]] = {p: [] for p in policies}
    for n in replicas:
        for c in capacities if capacities is not None else default_capacities(cols.num_blocks, n):
            for p in policies:
                rows[p].append(route(cols, n, c, p).as_dict())
    return {"replicas": replicas, "policies": policies, "utilization": UTILIZATION, "results": rows}
