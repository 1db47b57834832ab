"""Exact prefix-cache hit rate at every LRU capacity in one pass (Mattson's stack algorithm).

Rules (one definition, used by the page, the CLI and the tests):

- A request's **hit** is the longest run of its leading blocks (at most ``lookup_blocks``) present in
  the cache before it runs, in tokens: ``min(run x block_size, input_tokens)``.
- After the lookup it **touches its blocks from last to first**, inserting missing ones.
- **LRU at C blocks** keeps the C most recently touched blocks; **infinite** never evicts.
- **TTL**: a block is present only while ``now - last touch < ttl`` (times are request timestamps).

LRU is a stack algorithm: the cache at C blocks is the top C of one recency stack. A block's
**reuse distance** at a lookup is its depth in that stack before the request (1 = touched most
recently); it is present at C iff distance <= C. A run at C ends at the first block whose
prefix-maximum distance exceeds C, so each request adds its tokens to a per-distance histogram and a
cumulative sum gives the hit tokens at every capacity. TTL expiry only removes the stack's bottom
(the oldest touches), so "present at C with TTL" is "distance <= C and not expired".
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from kvviz.analysis.workload.columns import TraceColumns, as_columns
from kvviz.analysis.workload.stack import stack_pass
from kvviz.analysis.workload.trace import WorkloadTrace

COLD = 0
"""Distance of a block never touched before (infinite)."""


@dataclass
class WorkloadProfile:
    """What one pass learns: ``hits_at[C]`` = hit tokens at C blocks (C = 0..unique_blocks; the last
    entry is the infinite cache), the same under TTL, reuse-distance counts, per-block savings at the
    infinite cache, and per-request hit tokens at each tracked capacity (0 = infinite). The per-capacity
    and per-block series are int64 numpy arrays; the accessors return Python ints."""

    block_size: int
    num_requests: int
    input_tokens: int
    num_block_accesses: int
    unique_blocks: int
    hits_at: np.ndarray
    distance_counts: np.ndarray
    cold_accesses: int
    block_saved_tokens: np.ndarray
    block_hits: np.ndarray
    ttl_ms: float | None = None
    ttl_hits_at: np.ndarray | None = None
    tracked: dict[int, list[int]] = field(default_factory=dict)

    @property
    def hit_tokens_infinite(self) -> int:
        return int(self.hits_at[-1])

    @property
    def hit_rate_infinite(self) -> float:
        """The infinite cache's hit rate: hit tokens over input tokens (0 for an empty trace); the page and
        the CLI's ``hit_rate_infinite`` read it here."""
        return self.hit_tokens_infinite / self.input_tokens if self.input_tokens else 0.0

    def hit_tokens(self, capacity: int, ttl: bool = False) -> int:
        """Hit tokens with an LRU cache of ``capacity`` blocks (with the TTL when ``ttl``)."""
        series = self.ttl_hits_at if ttl else self.hits_at
        if series is None:
            raise ValueError("no TTL was analysed")
        return int(series[min(max(capacity, 0), len(series) - 1)])

    def hit_rate(self, capacity: int, ttl: bool = False) -> float:
        return self.hit_tokens(capacity, ttl) / self.input_tokens if self.input_tokens else 0.0

    def capacity_for(self, fraction: float) -> int:
        """Smallest capacity in blocks whose hit tokens reach ``fraction`` of the infinite cache's."""
        target = math.ceil(fraction * self.hit_tokens_infinite - 1e-9)
        if target <= 0:
            return 0
        return int(np.searchsorted(self.hits_at, target, side="left"))


def analyze(trace: WorkloadTrace | TraceColumns, ttl_seconds: float | None = None,
            track: Sequence[int] = ()) -> WorkloadProfile:
    """One pass over ``trace``: the exact LRU hit tokens at every capacity (and under ``ttl_seconds``),
    plus per-request hits at the ``track`` capacities (0 = infinite). Runs kvviz.analysis.workload.stack's
    compiled kernel over the trace's columns."""
    cols = as_columns(trace)
    ttl_ms = None if ttl_seconds is None else float(ttl_seconds) * 1000.0
    if ttl_ms is not None and not cols.has_timestamps:
        raise ValueError("a TTL needs a timestamp on every line")
    res = stack_pass(cols, ttl_ms, tuple(track))
    return WorkloadProfile(
        block_size=cols.block_size, num_requests=cols.num_requests, input_tokens=res.input_tokens,
        num_block_accesses=cols.num_accesses, unique_blocks=cols.num_blocks, hits_at=res.hits_at,
        distance_counts=res.distance_counts, cold_accesses=res.cold_accesses,
        block_saved_tokens=res.block_saved_tokens, block_hits=res.block_hits, ttl_ms=ttl_ms,
        ttl_hits_at=res.ttl_hits_at, tracked={c: res.tracked[k].tolist() for k, c in enumerate(track)},
    )


def replay_lru(trace: WorkloadTrace, capacity: int | None, ttl_seconds: float | None = None) -> list[int]:
    """Hit tokens of each request replaying ``trace`` through one LRU cache of ``capacity`` blocks
    (None = infinite): the plain simulation the one-pass curve must equal at that capacity."""
    ttl_ms = None if ttl_seconds is None else float(ttl_seconds) * 1000.0
    cache: OrderedDict[int, float] = OrderedDict()
    bs, out = trace.block_size, []
    for req in trace.requests:
        blocks, length, now = req.blocks, req.input_tokens, req.timestamp_ms or 0.0
        run = 0
        for i in range(min(req.lookup_blocks, len(blocks))):
            t = cache.get(blocks[i])
            if t is None or (ttl_ms is not None and now - t >= ttl_ms):
                break
            run += 1
        out.append(min(run * bs, length))
        touch_lru(cache, blocks, capacity, now)
    return out


def touch_lru(cache: OrderedDict, blocks, capacity: int | None, value: object = None) -> None:
    """An LRU cache after a request: its blocks touched last to first (its first block most recently used),
    each stored with ``value``; a new block evicts the least recently used one once ``capacity`` blocks are
    held (None: unbounded)."""
    for b in reversed(blocks):
        if b in cache:
            cache.move_to_end(b)
        elif capacity is not None and len(cache) >= capacity:
            cache.popitem(last=False)
        cache[b] = value


def log_grid(max_capacity: int, points: int) -> list[int]:
    """``min(points, max_capacity)`` distinct integer capacities from 1 to ``max_capacity``, log-spaced
    (nudged up by one where rounding would repeat a value at the low end)."""
    if max_capacity < 1:
        return []
    n = min(points, max_capacity)
    if n <= 1:
        return [max_capacity]
    step = math.log(max_capacity) / (n - 1)
    out: list[int] = []
    for i in range(n):
        v = round(math.exp(i * step)) if i < n - 1 else max_capacity
        low = out[-1] + 1 if out else 1
        out.append(min(max(v, low), max_capacity - (n - 1 - i)))
    return out


def distance_histogram(profile: WorkloadProfile, bins: int = 24) -> list[tuple[int, int, int]]:
    """Reuse distances in log-spaced bins: ``(low, high, count)`` with ``low <= d <= high``."""
    edges = log_grid(max(profile.unique_blocks, 1), bins + 1)
    out, lo = [], 1
    counts = profile.distance_counts
    for hi in edges:
        if hi < lo:
            continue
        out.append((lo, hi, int(counts[lo:hi + 1].sum())))
        lo = hi + 1
    return out
