"""The one-pass stack-distance kernel over a trace's columns, compiled with numba.

The rules are kvviz.analysis.workload.reuse_distance's (prefix run at the pre-request stack, touches last to first,
TTL on the last touch's request time). The recency stack is a Fenwick tree over touch times: ``last[b]``
is block b's last touch time (0 = never), ``tree`` counts live touches, and ``owner[t]`` is the block
touched at t. When the times reach the tree's size the live blocks are renumbered 1..live in place, so
three int32 arrays of about 2U entries (U = distinct blocks) are all the state: 20 bytes per block.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numba import njit

from kvviz.analysis.workload.columns import TraceColumns


@njit(cache=True, nogil=True)
def _compact(last, tree, owner, now, size):  # pragma: no cover - compiled
    """Renumber the live touches 1..live (in place), rebuild the tree; returns the new ``now``."""
    live = 0
    for t in range(1, now + 1):
        b = owner[t]
        if last[b] == t:
            live += 1
            owner[live] = b
            last[b] = live
    tree[:] = 0
    tree[1:live + 1] = 1
    for i in range(1, size + 1):  # linear Fenwick build
        j = i + (i & -i)
        if j <= size:
            tree[j] += tree[i]
    return live


@njit(cache=True, nogil=True, inline="always")
def _depth(last, tree, live, b):  # pragma: no cover - compiled
    """Stack depth of block b before this request (1 = most recent), 0 when never touched."""
    t = last[b] - 1
    if t < 0:
        return 0
    s = 0
    while t > 0:
        s += tree[t]
        t &= t - 1
    return live - s


@njit(cache=True, nogil=True, inline="always")
def _touch(last, tree, owner, now_t, live, b):  # pragma: no cover - compiled
    """Move block b to the top of the stack; returns the new ``(now_t, live)``."""
    size = len(tree) - 1
    t = last[b]
    if t:
        last[b] = 0
        while t <= size:
            tree[t] -= 1
            t += t & -t
    else:
        live += 1
    if now_t == size:
        now_t = _compact(last, tree, owner, now_t, size)
    now_t += 1
    t = now_t
    last[b] = t
    owner[t] = b
    while t <= size:
        tree[t] += 1
        t += t & -t
    return now_t, live


@njit(cache=True, nogil=True)
def _pass(blocks, offsets, lengths, lookup, stamps, bs, ttl_ms, track, tracked,
          gain, gain_ttl, dist, saved, hits, last, tree, owner, last_ts):  # pragma: no cover - compiled
    """The whole pass; fills the output arrays and returns ``(cold accesses, input tokens)``."""
    now_t = 0
    live = 0
    cold = 0
    tokens = 0
    use_ttl = ttl_ms >= 0.0
    for r in range(len(lengths)):
        start, end = offsets[r], offsets[r + 1]
        length, cap = lengths[r], lookup[r]
        tokens += length
        now = stamps[r]
        if now != now:  # NaN: no timestamp
            now = 0.0
        m = 0
        in_run = True
        ttl_alive = True
        for i in range(end - start):
            b = blocks[start + i]
            d = _depth(last, tree, live, b)
            if d == 0:
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
                if use_ttl and ttl_alive:
                    if now - last_ts[b] < ttl_ms:
                        gain_ttl[m] += tok
                    else:
                        ttl_alive = False
                for k in range(len(track)):
                    if track[k] == 0 or m <= track[k]:
                        tracked[k, r] += tok
            else:
                in_run = False
        for i in range(end - 1, start - 1, -1):  # touch last to first
            now_t, live = _touch(last, tree, owner, now_t, live, blocks[i])
        if use_ttl:
            for i in range(start, end):
                last_ts[blocks[i]] = now
    return cold, tokens


@dataclass
class StackResult:
    """What the kernel fills: hit tokens at every capacity (``hits_at[c]``, c = 0..U), the same under the
    TTL, reuse-distance counts, per-block saved tokens and hits, per-request hits at tracked capacities."""

    hits_at: np.ndarray  # int64 (U + 1,)
    ttl_hits_at: np.ndarray | None  # int64 (U + 1,)
    distance_counts: np.ndarray  # int64 (U + 1,)
    block_saved_tokens: np.ndarray  # int64 (U,)
    block_hits: np.ndarray  # int64 (U,)
    tracked: np.ndarray  # int64 (len(track), R)
    cold_accesses: int
    input_tokens: int


def stack_pass(cols: TraceColumns, ttl_ms: float | None = None, track: tuple[int, ...] = ()) -> StackResult:
    """Run the pass over ``cols``; ``track`` capacities (0 = infinite) get per-request hit tokens."""
    u = cols.num_blocks
    size = max(1024, 2 * u + 2)
    gain = np.zeros(u + 2, np.int64)
    gain_ttl = np.zeros(u + 2 if ttl_ms is not None else 1, np.int64)
    last_ts = np.zeros(u if ttl_ms is not None else 1, np.float64)
    dist = np.zeros(u + 1, np.int64)
    saved = np.zeros(u, np.int64)
    hits = np.zeros(u, np.int64)
    last = np.zeros(max(u, 1), np.int32)
    tree = np.zeros(size + 1, np.int32)
    owner = np.zeros(size + 1, np.int32)
    track_arr = np.asarray(track, np.int64)
    tracked = np.zeros((len(track), cols.num_requests), np.int64)
    cold, tokens = _pass(cols.blocks, cols.offsets, cols.input_tokens, cols.lookup_blocks, cols.timestamps,
                         cols.block_size, -1.0 if ttl_ms is None else float(ttl_ms), track_arr, tracked,
                         gain, gain_ttl, dist, saved, hits, last, tree, owner, last_ts)
    del last, tree, owner, last_ts
    hits_at = np.cumsum(gain[: u + 1], out=gain[: u + 1])
    ttl_hits_at = np.cumsum(gain_ttl[: u + 1], out=gain_ttl[: u + 1]) if ttl_ms is not None else None
    return StackResult(hits_at, ttl_hits_at, dist, saved, hits, tracked, int(cold), int(tokens))


GROUP_BIN_LINEAR = 64
"""Sub-sample hit histograms are binned by distance: one bin a distance up to this, then 64 bins a factor
of e (bins about 1.6% wide), so G sub-samples cost kilobytes, not G x the sample's distinct blocks."""


@njit(cache=True, nogil=True, inline="always")
def group_bin(d):  # pragma: no cover - compiled
    """The sub-sample histogram bin of distance ``d`` >= 1."""
    if d <= GROUP_BIN_LINEAR:
        return d
    return GROUP_BIN_LINEAR + int(GROUP_BIN_LINEAR * math.log(d / GROUP_BIN_LINEAR))


@njit(cache=True, nogil=True, inline="always")
def _sign(signs, b, k):  # pragma: no cover - compiled
    """Block b's sign (+1 or -1) in replicate k: bit k of its sign mask."""
    return 1 if (signs[b] >> k) & 1 else -1


@njit(cache=True, nogil=True)
def _signed_move(stree, stot, signs, b, t, step):  # pragma: no cover - compiled
    """Add ``step`` x block b's signs at touch time t (Fenwick, every replicate) and to the live totals."""
    size = stree.shape[0] - 1
    for k in range(stree.shape[1]):
        stot[k] += step * _sign(signs, b, k)
    while t <= size:
        for k in range(stree.shape[1]):
            stree[t, k] += step * _sign(signs, b, k)
        t += t & -t


@njit(cache=True, nogil=True)
def _touch_signed(last, tree, owner, stree, stot, signs, now_t, live, b):  # pragma: no cover - compiled
    """``_touch`` that also moves block b's signs in the signed trees (rebuilt after a renumbering)."""
    if stree.shape[1] and last[b]:
        _signed_move(stree, stot, signs, b, last[b], -1)
    before = now_t
    now_t, live = _touch(last, tree, owner, now_t, live, b)
    if stree.shape[1]:
        if now_t <= before:  # renumbered: rebuild the signed trees from the live touches 1..now_t - 1
            stree[:] = 0
            stot[:] = 0
            for t in range(1, now_t):
                _signed_move(stree, stot, signs, owner[t], t, 1)
        _signed_move(stree, stot, signs, b, now_t, 1)
    return now_t, live


@njit(cache=True, nogil=True)
def _signed_above(stree, stot, signs, last, b, out):  # pragma: no cover - compiled
    """Per replicate, the sum of the signs of the live blocks above block b (touched after it)."""
    for k in range(stree.shape[1]):
        out[k] = stot[k] - _sign(signs, b, k)
    t = last[b] - 1
    while t > 0:
        for k in range(stree.shape[1]):
            out[k] -= stree[t, k]
        t &= t - 1


@njit(cache=True, nogil=True)
def _sampled_pass(blocks, starts, tok, eligible, group, gain, ggain, gtok, last, tree,
                  owner, dist, signs, stree, stot, scale, rgain):  # pragma: no cover - compiled
    """A spatial sample's pass: each kept access (its tokens ``tok``, ``eligible`` when the lookup may hit
    it) adds its tokens at its own sampled distance (no prefix maximum: see docs/WORKLOAD.md, an ancestor
    is never deeper than its descendants); ``starts`` bound the requests. The same hits also go to their
    sub-sample's binned histogram ``ggain[group]`` (and tokens to ``gtok``); ``dist[j]`` keeps each
    access's distance (0 when it cannot hit). Replicate k (``stree``'s columns) moves each hit's distance
    by +-``scale`` x the signed sum over the blocks above it and bins it in ``rgain[2k]`` (+) and
    ``rgain[2k + 1]`` (-). Returns the kept tokens."""
    now_t = 0
    live = 0
    total = 0
    reps = stree.shape[1]
    above = np.zeros(reps, np.int64)
    far = 2 * (gain.shape[0] - 1)  # moved distances are binned up to twice the kept blocks, then clipped
    for r in range(len(starts) - 1):
        start, end = starts[r], starts[r + 1]
        for j in range(start, end):
            total += tok[j]
            g = group[j]
            gtok[g] += tok[j]
            if eligible[j]:
                d = _depth(last, tree, live, blocks[j])
                if d > 0:
                    gain[d] += tok[j]
                    ggain[g, group_bin(d)] += tok[j]
                    dist[j] = d
                    if reps:
                        _signed_above(stree, stot, signs, last, blocks[j], above)
                        for k in range(reps):
                            for m in range(2):
                                moved = d + (scale if m == 0 else -scale) * above[k]
                                moved = min(max(int(moved + 0.5), 1), far)
                                rgain[2 * k + m, group_bin(moved)] += tok[j]
        for j in range(end - 1, start - 1, -1):
            now_t, live = _touch_signed(last, tree, owner, stree, stot, signs, now_t, live, blocks[j])
    return total


@dataclass
class SampledPass:
    """A sample's pass: ``hits_at[c]`` = kept hit tokens at c kept blocks (c = 0..num_blocks), kept
    tokens, per sub-sample the cumulative binned hits (``group_hits[g, group_bin(c)]``) and tokens, each
    access's sampled distance (``dist``, int32, 0 = no hit), and the replicates' cumulative binned hits
    (``replica_hits``, two rows a replicate: its distances moved up, then down)."""

    hits_at: np.ndarray  # int64 (num_blocks + 1,)
    kept_tokens: int
    group_hits: np.ndarray  # int64 (groups, bins)
    group_tokens: np.ndarray  # int64 (groups,)
    dist: np.ndarray  # int32 (K,)
    replica_hits: np.ndarray  # int64 (2 x replicates, bins)


def sampled_pass(blocks: np.ndarray, starts: np.ndarray, tok: np.ndarray, eligible: np.ndarray,
                 group: np.ndarray, groups: int, num_blocks: int, signs: np.ndarray | None = None,
                 replicates: int = 0, scale: float = 0.0) -> SampledPass:
    """The pass over a sample's accesses (``blocks`` dense 0..num_blocks-1 in trace order, request ``r``
    = ``starts[r]:starts[r + 1]``, each access's sub-sample in ``group``, 0..groups-1); with
    ``replicates`` (at most 8) and each block's sign bits (``signs``, uint8 per dense block), the
    replicate histograms too (4 bytes a replicate per stack slot: 2 slots a block)."""
    gain = np.zeros(num_blocks + 1, np.int64)
    bins = group_bin(max(num_blocks, 1)) + 1
    ggain = np.zeros((groups, bins), np.int64)
    gtok = np.zeros(groups, np.int64)
    size = max(1024, 2 * num_blocks + 2)
    last = np.zeros(max(num_blocks, 1), np.int32)
    tree = np.zeros(size + 1, np.int32)
    owner = np.zeros(size + 1, np.int32)
    dist = np.zeros(len(blocks), np.int32)
    signs = np.zeros(max(num_blocks, 1), np.uint8) if signs is None else signs
    stree = np.zeros((size + 1 if replicates else 1, replicates), np.int32)
    stot = np.zeros(replicates, np.int64)
    rgain = np.zeros((2 * replicates, group_bin(2 * max(num_blocks, 1)) + 1), np.int64)
    total = _sampled_pass(blocks, starts, tok, eligible, group, gain, ggain, gtok, last, tree, owner, dist,
                          signs, stree, stot, float(scale), rgain)
    del stree, last, tree, owner
    return SampledPass(np.cumsum(gain, out=gain), int(total), np.cumsum(ggain, axis=1), gtok, dist,
                       np.cumsum(rgain, axis=1))


def _bin_span(j: int) -> tuple[int, int]:
    """The first and last distance of sub-sample bin ``j`` (``group_bin``)."""
    if j <= GROUP_BIN_LINEAR:
        return j, j
    ends = []
    for k in (j, j + 1):
        d = max(int(GROUP_BIN_LINEAR * math.exp((k - GROUP_BIN_LINEAR) / GROUP_BIN_LINEAR)), 1)
        while d > 1 and group_bin(d - 1) >= k:  # the float edge, made exact with the kernel's own rule
            d -= 1
        while group_bin(d) < k:
            d += 1
        ends.append(d)
    return ends[0], ends[1] - 1


def read_binned(cum: np.ndarray, c: float, top: int) -> np.ndarray:
    """Cumulative binned hits (``cum[..., group_bin(d)]`` = hits at distance <= the bin's last; no distance
    above ``top``) read at sampled capacity 1 <= ``c`` <= ``top``: spread evenly over each bin's
    distances, linear between integers."""

    def at(x: int) -> np.ndarray:
        j = group_bin(x)
        first, last = _bin_span(j)
        below = cum[..., j - 1]  # bin 0 holds nothing (distances start at 1)
        return below + (cum[..., j] - below) * ((x - first + 1) / (min(last, top) - first + 1))

    lo = int(math.floor(c))
    return at(lo) + (c - lo) * (at(min(lo + 1, top)) - at(lo))


CHECKPOINTS = 48
"""Sampled capacities (log-spaced) at which ``block_terms`` sums the blocks' squares."""


@njit(cache=True, nogil=True)
def _block_terms(dense, tok, dist, cps, t, y, yy, yt):  # pragma: no cover - compiled
    """Counting sort of the hits by their first checkpoint >= distance (int32 order), then add each
    checkpoint's hits to ``y`` and read sum y^2 and sum y t there."""
    n_cp = len(cps)
    count = np.zeros(n_cp + 1, np.int64)
    for j in range(len(dist)):
        d = dist[j]
        if d > 0:
            count[np.searchsorted(cps, d) + 1] += 1
    for i in range(n_cp):
        count[i + 1] += count[i]
    order = np.empty(count[n_cp], np.int32)
    fill = count[:n_cp].copy()
    for j in range(len(dist)):
        d = dist[j]
        if d > 0:
            k = np.searchsorted(cps, d)
            order[fill[k]] = j
            fill[k] += 1
    s_yy = 0.0
    s_yt = 0.0
    for i in range(n_cp):
        for m in range(count[i], count[i + 1]):
            j = order[m]
            b = dense[j]
            v = float(tok[j])
            s_yy += 2.0 * y[b] * v + v * v  # (y + v)^2 - y^2
            s_yt += v * t[b]
            y[b] += v
        yy[i] = s_yy
        yt[i] = s_yt


def block_terms(dense: np.ndarray, tok: np.ndarray, dist: np.ndarray, num_blocks: int,
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """At log-spaced sampled capacities c: sum_b y_b(c)^2 and sum_b y_b(c) t_b, where y_b(c) is block b's
    kept hit tokens at distance <= c and t_b its kept tokens; and sum_b t_b^2. Extra memory: 4 bytes a hit
    and 16 a block."""
    n = max(num_blocks, 1)
    cps = np.unique(np.round(np.geomspace(1, n, CHECKPOINTS)).astype(np.int64))
    t = np.bincount(dense, tok, n).astype(np.float64)
    y = np.zeros(n, np.float64)
    yy = np.zeros(len(cps), np.float64)
    yt = np.zeros(len(cps), np.float64)
    _block_terms(dense, tok, dist, cps, t, y, yy, yt)
    return cps.astype(np.float64), yy, yt, float(t @ t)
