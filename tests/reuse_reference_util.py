"""The workload analyzer's first one-pass curve, pure Python (before the compiled kernel): kept verbatim as
the reference the compiled kernel (kvviz.analysis.workload.stack) must equal bit for bit on every output."""

from __future__ import annotations

import json
from collections.abc import Sequence

from kvviz.analysis.workload.parse import parse_trace
from kvviz.analysis.workload.trace import WorkloadTrace

COLD = 0


def tree_trace(reqs: list[tuple[list[int], int, int]], block_size: int = 8) -> WorkloadTrace:
    """Requests as paths in a small tree of chained blocks (a branch choice per block, tokens cut from
    the last block, ms since the previous request): shared prefixes, branches, partial tails."""
    lines, ids, t = [], {}, 0
    for path, cut, gap in reqs:
        t += gap
        chain, prefix = [], ()
        for choice in path:
            prefix = prefix + (choice,)
            chain.append(ids.setdefault(prefix, len(ids)))
        length = max(len(chain) * block_size - cut % block_size, (len(chain) - 1) * block_size + 1, 0)
        lines.append({"hash_ids": chain, "input_length": length, "timestamp": t})
    return parse_trace("\n".join(json.dumps(x) for x in lines), block_size)


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




def analyze_reference(trace: WorkloadTrace, ttl_seconds: float | None = None,
                      track: Sequence[int] = ()) -> dict:
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
    return {"hits_at": _cumulative(gain, u), "distance_counts": dist, "cold_accesses": cold,
            "block_saved_tokens": saved, "block_hits": hits, "input_tokens": input_tokens, "accesses": accesses,
            "ttl_hits_at": _cumulative(gain_ttl, u) if gain_ttl is not None else None, "tracked": tracked}


def _cumulative(gain: list[int], u: int) -> list[int]:
    out, total = [0] * (u + 1), 0
    for c in range(1, u + 1):
        total += gain[c]
        out[c] = total
    return out
