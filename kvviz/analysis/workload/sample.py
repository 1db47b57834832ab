"""SHARDS-style spatial sampling of a trace (Waldspurger et al., FAST'15): keep a block when a hash of its
id falls under ``rate``, run the stack pass on the kept accesses only, and scale capacities by the rate.

Why blocks and not requests: every request of a real trace starts with the same few system-prompt
blocks, so sampling requests by their first block keeps all or none. Sampling blocks is right under the
prefix rule because an ancestor block is always at least as recent as its descendants (a request touches
its whole chain, tail first), so a request's hit at C is the sum of its blocks' tokens whose own reuse
distance is <= C; that is a sum over single accesses, which spatial sampling estimates (docs/WORKLOAD.md).

The error bar (about 95%): twice a standard error, plus the capacity axis's move, plus unseen heavy first
blocks. The standard error is the larger of the ``GROUPS`` hash-disjoint sub-samples' spread and the kept
blocks' own ratio-estimator variance (sums of each block's squared hits at checkpoints), which sees one hot
block kept with its full weight; the axis move is the largest over ``REPLICATES`` replicates whose hits are
re-binned at distances moved by 2 sd of their kept count, as signed sums over the blocks above (hits that
share blocks above move together, as in the real error: a whole-cycle reuse cliff moves as one, while
unrelated reuse averages out); a request's first block that carries a point of the prompt tokens and is
not kept adds its share (its exact tokens are counted as the trace streams). See docs/WORKLOAD.md.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvviz.analysis.workload.columns import TraceColumns
from kvviz.analysis.workload.stack import block_terms, group_bin, read_binned, sampled_pass

GROUPS = 32
BYTES_PER_SAMPLED_BLOCK = 480
"""Peak bytes of a sampled analysis per kept block: the kept accesses (about 22 bytes each, 8.4 a block on
the bench trace), their interning, the pass's state and curves (make bench: about 300), and the error's
per-block terms (a distance a kept access, an order entry a hit, two floats a block: about 80 more;
measured 473 in all on a generated 3.6M-access trace at rate 0.2). The pass lets go of the kept ids and
requests once read and the replicates' signed trees (64 bytes a kept block) live only while it runs: make
bench's peak is 278.5 bytes a kept block (412.8 before); smaller samples weigh each piece's hashing more."""
_THRESHOLD_BITS = 32
SHIFT_SIGMAS = 2.0
"""Standard deviations of the capacity axis the error allows for (``SampledProfile.shift``)."""
HEAVY_ROOT_SHARE = 0.01
"""A first block is heavy when its own tokens, over every request it starts, are this share of all prompt
tokens: one such block moves the hit rate by a point depending on whether the hash keeps it."""
RESOLVED_KEPT_BLOCKS = 10
REPLICATES = 8
"""Moved-distance replicates of the capacity axis (``SampleCurve.axis_error``): each block gets a random
sign per replicate from a second hash of its id."""
_SIGN_SALT = 0x5A5A_A5A5_0F0F_F0F0


def block_hash(keys: np.ndarray, salt: int = 0) -> np.ndarray:
    """splitmix64 of ``keys`` (uint64, vectorised): a fixed, well-mixed hash of a block id; each ``salt``
    gives an independent hash (the keys are xor-ed with a mixed salt first)."""
    with np.errstate(over="ignore"):
        if salt:
            keys = keys.astype(np.uint64) ^ block_hash(np.asarray([salt], np.uint64))[0]
        z = keys.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def block_keys(cols: TraceColumns) -> np.ndarray:
    """The id each block is sampled by: its original Mooncake id, else the 48 bits of its block hash that
    label it, so a block has the same key in every file of a trace."""
    if isinstance(cols.labels, np.ndarray):
        return cols.labels
    return np.fromiter((int(label, 16) for label in cols.labels), np.int64, len(cols.labels))


def rate_for_memory(memory_mb: float, unique_blocks: int) -> float:
    """The largest rate whose sampled pass fits ``memory_mb`` (1.0 when the exact pass fits)."""
    if unique_blocks <= 0:
        return 1.0
    return min(1.0, memory_mb * 2**20 / (BYTES_PER_SAMPLED_BLOCK * unique_blocks))


@dataclass
class SampleCurve:
    """One sample's curve: hit tokens at each sampled capacity, kept tokens, kept blocks, its rate."""

    rate: float
    hits_at: np.ndarray
    kept_tokens: int
    kept_blocks: int
    kept_accesses: int
    checkpoints: np.ndarray | None = None
    """Sampled capacities where the blocks' own variance terms were summed (``block_terms``)."""
    sum_yy: np.ndarray | None = None
    sum_yt: np.ndarray | None = None
    sum_tt: float = 0.0
    replica_hits: np.ndarray | None = None
    """Replicates' binned cumulative hits, their distances moved by +-2 sd of the kept count above each
    hit (``stack.sampled_pass``): two rows a replicate."""

    def hits_near(self, capacity: int) -> float:
        """Kept hit tokens at ``capacity`` full-trace blocks: a block at distance d has about
        1 + rate x (d - 1) kept blocks at or above it, so the sampled curve is read (interpolated) there."""
        if capacity <= 0:
            return 0.0
        c = min(1.0 + self.rate * (capacity - 1), len(self.hits_at) - 1.0)
        lo = int(math.floor(c))
        hi = min(lo + 1, len(self.hits_at) - 1)
        return float(self.hits_at[lo] + (c - lo) * (self.hits_at[hi] - self.hits_at[lo]))

    def rate_at(self, capacity: int, coverage: float) -> float:
        """Estimated hit rate at ``capacity`` full-trace blocks (kept-token ratio x block coverage)."""
        if self.kept_tokens == 0 or capacity <= 0:
            return 0.0
        return self.hits_near(capacity) / self.kept_tokens * coverage

    def block_error(self, capacity: int, coverage: float) -> float | None:
        """A standard error of ``rate_at`` from the kept blocks themselves (a ratio estimator over blocks
        kept with probability ``rate``): sqrt((1 - rate) x sum (y_b - r t_b)^2) / kept tokens, y_b being
        block b's hit tokens at the capacity and t_b its kept tokens (sums read between checkpoints; the
        population's sum of squares is the kept one over ``rate`` and its tokens the kept ones over
        ``rate``, so the 1/rate of the Bernoulli variance cancels). A hot block kept weighs in with its
        own square, which a spread over sub-samples (most of them without it) underrates. None without
        the sums."""
        if self.checkpoints is None or self.sum_yy is None or self.sum_yt is None or not self.kept_tokens:
            return None
        if capacity <= 0:
            return 0.0
        c = min(1.0 + self.rate * (capacity - 1), len(self.hits_at) - 1.0)
        yy = float(np.interp(c, self.checkpoints, self.sum_yy))
        yt = float(np.interp(c, self.checkpoints, self.sum_yt))
        r = self.hits_near(capacity) / self.kept_tokens
        total = max(yy - 2.0 * r * yt + r * r * self.sum_tt, 0.0)
        return math.sqrt((1.0 - self.rate) * total) / self.kept_tokens * coverage

    def axis_error(self, capacity: int, coverage: float) -> float | None:
        """How far the curve moves at ``capacity`` when every hit's distance moves by 2 sd of its kept count
        (signed sums over the blocks above it, so hits that share blocks above move together, as the real
        error does): the largest move over the replicates, each read from its binned hits against the
        sample's own curve. None without replicates."""
        if self.replica_hits is None or not len(self.replica_hits) or not self.kept_tokens:
            return None
        if capacity <= 0:
            return 0.0
        far = 2 * max(self.kept_blocks, 1)  # replicates' distances go up to twice the kept blocks
        moved = read_binned(self.replica_hits, min(1.0 + self.rate * (capacity - 1), float(far)), far)
        return float(np.abs(moved - self.hits_near(capacity)).max()) / self.kept_tokens * coverage


@dataclass
class Kept:
    """The kept accesses of one piece of a trace, in trace order: the id each is sampled by, its request
    (0-based within the piece), its tokens, whether the lookup may hit it, and its sub-sample (group)."""

    keys: np.ndarray  # int64 (K,)
    req: np.ndarray  # int64 (K,)
    tok: np.ndarray  # int32 (K,)
    eligible: np.ndarray  # bool (K,)
    group: np.ndarray  # uint8 (K,)

    def select(self, mask: np.ndarray) -> Kept:
        return Kept(self.keys[mask], self.req[mask], self.tok[mask], self.eligible[mask], self.group[mask])

    def shifted(self, requests: int) -> Kept:
        """The same accesses with their requests numbered from ``requests``."""
        return Kept(self.keys, self.req + requests, self.tok, self.eligible, self.group)


_FIELDS = ("keys", "req", "tok", "eligible", "group")


def concat(pieces: list[Kept]) -> Kept:
    """Pieces back to back (in the order given: trace order when the pieces are); the list is emptied
    field by field as it goes, so the copy never holds two of a field."""
    if not pieces:
        return Kept(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, bool),
                    np.zeros(0, np.uint8))
    out = {}
    for f in _FIELDS:
        out[f] = np.concatenate([getattr(p, f) for p in pieces])
        for p in pieces:
            setattr(p, f, None)
    pieces.clear()
    return Kept(**out)


def kept_mask(hashes: np.ndarray, rate: float) -> np.ndarray:
    """Which block hashes fall under ``rate`` (the sampling decision)."""
    return (hashes >> np.uint64(64 - _THRESHOLD_BITS)) < np.uint64(int(rate * 2**_THRESHOLD_BITS))


def keep(cols: TraceColumns, rate: float, salt: int = 0, keys: np.ndarray | None = None) -> Kept:
    """The accesses of ``cols`` whose block's hash (of ``keys``, default ``block_keys``) is under ``rate``."""
    keys = block_keys(cols) if keys is None else keys
    h = block_hash(keys, salt)[cols.blocks]  # per access, by its block
    idx = np.flatnonzero(kept_mask(h, rate))
    req = np.searchsorted(cols.offsets, idx, side="right") - 1
    pos = idx - cols.offsets[req]
    length = cols.input_tokens[req]
    bs = cols.block_size
    tok = (np.minimum((pos + 1) * bs, length) - np.minimum(pos * bs, length)).astype(np.int32)
    group = ((h[idx] & np.uint64(0xFFFF)) % np.uint64(GROUPS)).astype(np.uint8)
    return Kept(keys[cols.blocks[idx]], req, tok, pos < cols.lookup_blocks[req], group)


@dataclass
class GroupCurve:
    """One sub-sample's hits, at the distances measured on the whole sample (binned: ``group_bin``), and
    its kept tokens: the spread of these estimates is the sampling error of the whole sample's."""

    rate: float
    hits: np.ndarray  # int64 (bins,), cumulative
    kept_tokens: int
    num_blocks: int

    def rate_at(self, capacity: int, coverage: float) -> float:
        if self.kept_tokens == 0 or capacity <= 0:
            return 0.0
        c = min(1.0 + self.rate * (capacity - 1), float(max(self.num_blocks, 1)))
        lo = int(math.floor(c))
        a, b = self.hits[group_bin(lo)], self.hits[group_bin(min(lo + 1, max(self.num_blocks, 1)))]
        return float(a + (c - lo) * (b - a)) / self.kept_tokens * coverage


def curve_of(kept: Kept, rate: float, replicates: int = REPLICATES) -> tuple[SampleCurve, list[GroupCurve]]:
    """The curve of kept accesses (any ids, requests non-decreasing in trace order), its ``GROUPS``
    sub-samples' curves at the same distances, and ``replicates`` moved-distance replicates. Consumes
    ``kept``'s ids and requests (set to None once read: 16 bytes a kept access off the peak)."""
    accesses = len(kept.keys)
    starts = np.concatenate(([0], np.flatnonzero(np.diff(kept.req)) + 1, [accesses])).astype(np.int64)
    kept.req = None  # type: ignore[assignment]
    dense, uniques = _intern(kept.keys)
    kept.keys = None  # type: ignore[assignment]
    num_blocks = len(uniques)
    signs = (block_hash(uniques.astype(np.int64), _SIGN_SALT) & np.uint64(0xFF)).astype(np.uint8)
    res = sampled_pass(dense, starts, kept.tok, kept.eligible, kept.group, GROUPS, num_blocks, signs,
                       replicates, SHIFT_SIGMAS * math.sqrt(max(1.0 - rate, 0.0)))
    del signs, uniques
    groups = [GroupCurve(rate, res.group_hits[g], int(res.group_tokens[g]), num_blocks) for g in range(GROUPS)]
    cps, yy, yt, tt = block_terms(dense, kept.tok, res.dist, num_blocks)
    del res.dist
    return SampleCurve(rate, res.hits_at, res.kept_tokens, num_blocks, accesses, cps, yy, yt, tt,
                       res.replica_hits if replicates else None), groups


def _intern(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense int32 ids 0..U-1 of ``keys`` (a hash table, first-seen order: no sorted copy) and the U keys."""
    import pandas as pd

    codes, uniques = pd.factorize(keys, sort=False)
    return codes.astype(np.int32), np.asarray(uniques)


@dataclass
class SampledProfile:
    """A sampled analysis: the ``GROUPS`` hash-disjoint sub-samples' curves, the whole sample's curve
    (None when only the sub-samples were computed, as on a cluster: then the estimate pools them), and
    the exact totals (requests, tokens, accesses) that need no sampling; ``coverage`` = block tokens /
    prompt tokens."""

    rate: float
    sample: SampleCurve | None
    groups: list[SampleCurve] | list[GroupCurve]
    block_size: int
    num_requests: int
    input_tokens: int
    num_block_accesses: int
    coverage: float
    unseen_heavy: float = 0.0
    """Prompt-token share of the heavy first blocks (``HEAVY_ROOT_SHARE``) the hash did not keep: the sample
    cannot see them, so their hits are in the error."""

    @property
    def kept_blocks(self) -> int:
        return self.sample.kept_blocks if self.sample else sum(g.kept_blocks for g in self.groups)  # type: ignore[union-attr]

    @property
    def kept_accesses(self) -> int:
        return self.sample.kept_accesses if self.sample else sum(g.kept_accesses for g in self.groups)  # type: ignore[union-attr]

    @property
    def distance_rate(self) -> float:
        """The rate distances were measured at: the whole sample's, or one sub-sample's when pooled."""
        return self.rate if self.sample is not None else self.rate / max(len(self.groups), 1)

    @property
    def resolved_from(self) -> int:
        """The smallest capacity the estimate resolves: 10 kept blocks at ``distance_rate``; below it the
        curve is read between the first few kept distances and the bar may not cover the error."""
        return math.ceil(RESOLVED_KEPT_BLOCKS / self.distance_rate)

    @property
    def unique_blocks(self) -> int:
        """Estimated distinct blocks of the whole trace."""
        return round(self.kept_blocks / self.rate)

    def hit_rate(self, capacity: int) -> float:
        if self.sample is not None:
            return self.sample.rate_at(capacity, self.coverage)
        kept = sum(g.kept_tokens for g in self.groups)
        hits = sum(g.hits_near(capacity) for g in self.groups)  # type: ignore[union-attr]
        return hits / kept * self.coverage if kept and capacity > 0 else 0.0

    def error(self, capacity: int) -> float:
        """About a 95% interval half-width of ``hit_rate(capacity)`` (absolute hit rate): twice the larger
        standard error (sub-samples' spread, kept blocks' own), plus the capacity axis's move (the
        replicates', ``SampleCurve.axis_error``; pooled sub-samples without them: ``shift``), plus the token
        share of heavy first blocks the sample missed (``unseen_heavy``)."""
        if self.sample is not None and self.rate >= 1.0:
            return 0.0  # every block kept: the exact curve
        rates = [g.rate_at(capacity, self.coverage) for g in self.groups if g.kept_tokens]
        if len(rates) < 2:
            return 1.0
        spread = float(np.std(rates, ddof=1)) / math.sqrt(len(rates))
        own = self.sample.block_error(capacity, self.coverage) if self.sample is not None else None
        axis = self.sample.axis_error(capacity, self.coverage) if self.sample is not None else None
        return 2.0 * max(spread, own or 0.0) + (self.shift(capacity) if axis is None else axis) + self.unseen_heavy

    def shift(self, capacity: int) -> float:
        """How far the curve moves when the capacity axis is off by two standard deviations, for every hit
        at once (the bound when no replicates were kept, as when sub-samples are pooled): the kept blocks
        among the C most recent are Binomial(C, rate), s = sqrt(C (1 - rate) / rate) full-trace blocks, and
        the blocks of one request (one chain) are touched together, so every block of a stretch of traffic
        sees the same kept set above it: the shift is shared, not averaged away. The curve is
        non-decreasing, so the largest move over C +- 2s is at an end."""
        rate = self.distance_rate
        if capacity <= 0 or rate >= 1.0:
            return 0.0
        span = SHIFT_SIGMAS * math.sqrt(capacity * (1.0 - rate) / rate)
        lo, hi = max(1, math.floor(capacity - span)), math.ceil(capacity + span)
        here = self.hit_rate(capacity)
        return max(self.hit_rate(hi) - here, here - self.hit_rate(lo))


class Sampler:
    """Keeps a spatial sample of a trace fed in pieces (``add``: columns, e.g. one file or one shard at a
    time, with the ids blocks are sampled by), so only the kept accesses stay in memory."""

    def __init__(self, rate: float, salt: int = 0) -> None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"the sample rate must be in (0, 1], got {rate}")
        self.rate, self.salt = rate, salt
        self.parts: list[Kept] = []
        self.totals = Totals()
        self.root_keys = np.zeros(0, np.int64)
        self.root_tokens = np.zeros(0, np.int64)

    def add(self, cols: TraceColumns, keys: np.ndarray | None = None) -> None:
        keys = block_keys(cols) if keys is None else keys
        self.parts.append(keep(cols, self.rate, self.salt, keys).shifted(self.totals.requests))
        self.totals.add(cols)
        self._add_unseen_roots(cols, keys)

    def _add_unseen_roots(self, cols: TraceColumns, keys: np.ndarray) -> None:
        """Exact prompt tokens per first block the hash does not keep (summed by key: any piece size gives
        the same totals)."""
        has = np.diff(cols.offsets) > 0
        roots = keys[cols.blocks[cols.offsets[:-1][has]]].astype(np.int64)
        unseen = ~kept_mask(block_hash(roots, self.salt), self.rate)
        tokens = np.minimum(cols.input_tokens[has], cols.block_size).astype(np.int64)  # the first block's own
        roots, tokens = roots[unseen], tokens[unseen]
        merged, inverse = np.unique(np.concatenate((self.root_keys, roots)), return_inverse=True)
        self.root_tokens = np.bincount(inverse, np.concatenate((self.root_tokens, tokens)),
                                       len(merged)).astype(np.int64)
        self.root_keys = merged

    def finish(self) -> SampledProfile:
        kept = concat(self.parts)
        self.parts.clear()
        sample, groups = curve_of(kept, self.rate)
        profile = self.totals.profile(self.rate, sample, groups)
        if self.totals.tokens and self.rate < 1.0:
            share = self.root_tokens / self.totals.tokens
            profile.unseen_heavy = float(share[share >= HEAVY_ROOT_SHARE].sum())
        return profile


@dataclass
class Totals:
    """What needs no sampling: requests, prompt tokens, tokens in blocks, block accesses, the block size."""

    requests: int = 0
    tokens: int = 0
    block_tokens: int = 0
    accesses: int = 0
    block_size: int = 0

    def add(self, cols: TraceColumns) -> None:
        nblocks = np.diff(cols.offsets)
        self.block_tokens += int(np.minimum(nblocks * cols.block_size, cols.input_tokens).sum())
        self.tokens += int(cols.input_tokens.sum())
        self.requests += cols.num_requests
        self.accesses += cols.num_accesses
        self.block_size = cols.block_size

    def merge(self, other: Totals) -> None:
        self.requests += other.requests
        self.tokens += other.tokens
        self.block_tokens += other.block_tokens
        self.accesses += other.accesses
        self.block_size = other.block_size

    def profile(self, rate: float, sample: SampleCurve | None, groups: list[SampleCurve]) -> SampledProfile:
        return SampledProfile(rate, sample, groups, self.block_size, self.requests, self.tokens, self.accesses,
                              self.block_tokens / self.tokens if self.tokens else 0.0)


def analyze_sampled(cols: TraceColumns, rate: float, salt: int = 0) -> SampledProfile:
    """Sample ``cols`` at ``rate`` (0 < rate <= 1) by block and estimate the curve with its error."""
    sampler = Sampler(rate, salt)
    sampler.add(cols)
    return sampler.finish()
