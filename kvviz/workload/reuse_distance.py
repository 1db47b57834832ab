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

import bisect
import math
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

from kvviz.workload.trace import WorkloadTrace

COLD = 0
"""Distance of a block never touched before (infinite)."""


class _Recency:
    """Recency stack of blocks as a Fenwick tree over touch times; ``depth(b)`` = live blocks touched
    at or after ``b``'s last touch. Times are renumbered when the tree fills, so its size stays
    within twice the number of distinct blocks (memory linear in distinct blocks)."""

    __slots__ = ("last", "tree", "owner", "size", "now", "live")

    def __init__(self, num_blocks: int) -> None:
        self.last = [0] * num_blocks
        self.size = 1024
        self.tree = [0] * (self.size + 1)
        self.owner = [0] * (self.size + 1)
        self.now = 0
        self.live = 0

    def depth(self, block: int) -> int:
        """Stack depth of ``block`` (1 = most recent), or ``COLD`` when never touched."""
        t = self.last[block] - 1
        if t < 0:
            return COLD
        tree, s = self.tree, 0
        while t > 0:
            s += tree[t]
            t &= t - 1
        return self.live - s

    def touch(self, block: int) -> None:
        tree, size = self.tree, self.size
        t = self.last[block]
        if t:
            self.last[block] = 0
            while t <= size:
                tree[t] -= 1
                t += t & -t
        else:
            self.live += 1
        if self.now == size:
            self._compact()
            tree, size = self.tree, self.size
        self.now += 1
        t = self.now
        self.last[block] = t
        self.owner[t] = block
        while t <= size:
            tree[t] += 1
            t += t & -t

    def _compact(self) -> None:
        last, owner = self.last, self.owner
        live_blocks = [owner[t] for t in range(1, self.now + 1) if last[owner[t]] == t]
        self.size = max(1024, 2 * len(live_blocks) + 2)
        self.owner = [0] * (self.size + 1)
        tree = [0] * (self.size + 1)
        for new_t, b in enumerate(live_blocks, start=1):
            last[b] = new_t
            self.owner[new_t] = b
            tree[new_t] = 1
        for i in range(1, self.size + 1):  # linear Fenwick build
            j = i + (i & -i)
            if j <= self.size:
                tree[j] += tree[i]
        self.tree = tree
        self.now = len(live_blocks)


@dataclass
class WorkloadProfile:
    """What one pass learns: ``hits_at[C]`` = hit tokens at C blocks (C = 0..unique_blocks; the last
    entry is the infinite cache), the same under TTL, reuse-distance counts, per-block savings at the
    infinite cache, and per-request hit tokens at each tracked capacity (0 = infinite)."""

    block_size: int
    num_requests: int
    input_tokens: int
    num_block_accesses: int
    unique_blocks: int
    hits_at: list[int]
    distance_counts: list[int]
    cold_accesses: int
    block_saved_tokens: list[int]
    block_hits: list[int]
    ttl_ms: float | None = None
    ttl_hits_at: list[int] | None = None
    tracked: dict[int, list[int]] = field(default_factory=dict)

    @property
    def hit_tokens_infinite(self) -> int:
        return self.hits_at[-1]

    def hit_tokens(self, capacity: int, ttl: bool = False) -> int:
        """Hit tokens with an LRU cache of ``capacity`` blocks (with the TTL when ``ttl``)."""
        series = self.ttl_hits_at if ttl else self.hits_at
        if series is None:
            raise ValueError("no TTL was analysed")
        return series[min(max(capacity, 0), len(series) - 1)]

    def hit_rate(self, capacity: int, ttl: bool = False) -> float:
        return self.hit_tokens(capacity, ttl) / self.input_tokens if self.input_tokens else 0.0

    def capacity_for(self, fraction: float) -> int:
        """Smallest capacity in blocks whose hit tokens reach ``fraction`` of the infinite cache's."""
        target = math.ceil(fraction * self.hit_tokens_infinite - 1e-9)
        if target <= 0:
            return 0
        return bisect.bisect_left(self.hits_at, target)


def analyze(trace: WorkloadTrace, ttl_seconds: float | None = None,
            track: Sequence[int] = ()) -> WorkloadProfile:
    """One pass over ``trace``: the exact LRU hit tokens at every capacity (and under ``ttl_seconds``),
    plus per-request hits at the ``track`` capacities (0 = infinite)."""
    ttl_ms = None if ttl_seconds is None else float(ttl_seconds) * 1000.0
    if ttl_ms is not None and not trace.has_timestamps:
        raise ValueError("a TTL needs a timestamp on every line")
    u, bs = trace.num_blocks, trace.block_size
    stack = _Recency(u)
    depth, touch = stack.depth, stack.touch
    gain = [0] * (u + 2)
    gain_ttl = [0] * (u + 2) if ttl_ms is not None else None
    last_ts = [0.0] * u if ttl_ms is not None else None
    dist = [0] * (u + 1)
    saved, hits = [0] * u, [0] * u
    tracked = {c: [] for c in track}
    cold = accesses = input_tokens = 0
    for req in trace.requests:
        blocks, length, cap = req.blocks, req.input_tokens, req.lookup_blocks
        input_tokens += length
        accesses += len(blocks)
        now = req.timestamp_ms or 0.0
        m, in_run, ttl_alive = 0, True, True
        req_gain: list[tuple[int, int]] = []
        for i, b in enumerate(blocks):
            d = depth(b)
            if d == COLD:
                cold += 1
                in_run = False
                continue
            dist[d] += 1
            if in_run and i < cap:
                if d > m:
                    m = d
                tok = min((i + 1) * bs, length) - min(i * bs, length)
                gain[m] += tok
                saved[b] += tok
                hits[b] += 1
                if gain_ttl is not None and ttl_alive:
                    if now - last_ts[b] < ttl_ms:  # type: ignore[index, operator]
                        gain_ttl[m] += tok
                    else:
                        ttl_alive = False
                if tracked:
                    req_gain.append((m, tok))
            else:
                in_run = False
        for c, series in tracked.items():
            series.append(sum(tok for dm, tok in req_gain if c == 0 or dm <= c))
        for b in reversed(blocks):
            touch(b)
        if last_ts is not None:
            for b in blocks:
                last_ts[b] = now
    return WorkloadProfile(
        block_size=bs, num_requests=trace.num_requests, input_tokens=input_tokens,
        num_block_accesses=accesses, unique_blocks=u, hits_at=_cumulative(gain, u),
        distance_counts=dist, cold_accesses=cold, block_saved_tokens=saved, block_hits=hits,
        ttl_ms=ttl_ms, ttl_hits_at=_cumulative(gain_ttl, u) if gain_ttl is not None else None, tracked=tracked,
    )


def _cumulative(gain: list[int], u: int) -> list[int]:
    out, total = [0] * (u + 1), 0
    for c in range(1, u + 1):
        total += gain[c]
        out[c] = total
    return out


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
        for b in reversed(blocks):
            if b in cache:
                cache.move_to_end(b)
            elif capacity is not None and len(cache) >= capacity:
                cache.popitem(last=False)
            cache[b] = now
    return out


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
        out.append((lo, hi, sum(counts[lo:hi + 1])))
        lo = hi + 1
    return out
