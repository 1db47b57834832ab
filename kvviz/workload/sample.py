"""SHARDS-style spatial sampling of a trace (Waldspurger et al., FAST'15): keep a block when a hash of its
id falls under ``rate``, run the stack pass on the kept accesses only, and scale capacities by the rate.

Why blocks and not requests: every request of a real trace starts with the same few system-prompt
blocks, so sampling requests by their first block keeps all or none. Sampling blocks is right under the
prefix rule because an ancestor block is always at least as recent as its descendants (a request touches
its whole chain, tail first), so a request's hit at C is the sum of its blocks' tokens whose own reuse
distance is <= C; that is a sum over single accesses, which spatial sampling estimates (docs/WORKLOAD.md).

The error bar: the kept blocks are split by another part of the hash into ``GROUPS`` disjoint
sub-samples, each a spatial sample at ``rate / GROUPS``; twice the standard deviation of their
estimates over sqrt(GROUPS) is reported (about a 95% interval) per capacity, and its maximum overall.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from kvviz.workload.columns import TraceColumns
from kvviz.workload.reuse_distance import log_grid
from kvviz.workload.stack import sampled_pass

GROUPS = 8
BYTES_PER_SAMPLED_BLOCK = 64
"""Peak bytes of the sampled pass per kept block (its state and curve; bench: about 44)."""
_THRESHOLD_BITS = 32


def block_hash(keys: np.ndarray, salt: int = 0) -> np.ndarray:
    """splitmix64 of ``keys`` (uint64, vectorised): a fixed, well-mixed hash of a block id."""
    with np.errstate(over="ignore"):
        z = keys.astype(np.uint64) + np.uint64((0x9E3779B97F4A7C15 + salt) % 2**64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def block_keys(cols: TraceColumns) -> np.ndarray:
    """The id each block is sampled by: its original Mooncake id, else its dense id."""
    return cols.labels if isinstance(cols.labels, np.ndarray) else np.arange(cols.num_blocks, dtype=np.int64)


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

    def rate_at(self, capacity: int, coverage: float) -> float:
        """Estimated hit rate at ``capacity`` full-trace blocks (kept-token ratio x block coverage)."""
        if self.kept_tokens == 0 or capacity <= 0:
            return 0.0
        # a block at distance d has about 1 + rate x (d - 1) kept blocks at or above it: interpolate there
        c = min(1.0 + self.rate * (capacity - 1), len(self.hits_at) - 1.0)
        lo = int(math.floor(c))
        hi = min(lo + 1, len(self.hits_at) - 1)
        hits = self.hits_at[lo] + (c - lo) * (self.hits_at[hi] - self.hits_at[lo])
        return float(hits) / self.kept_tokens * coverage


def _curve(blocks: np.ndarray, req: np.ndarray, pos: np.ndarray, lengths: np.ndarray, lookup: np.ndarray,
           block_size: int, rate: float) -> SampleCurve:
    """The curve of kept accesses (``blocks`` dense 0..k-1, their request and position, in trace order)."""
    offsets = np.searchsorted(req, np.arange(len(lengths) + 1)).astype(np.int64)
    uniq, dense = np.unique(blocks, return_inverse=True)
    hits_at, kept = sampled_pass(dense.astype(np.int32).ravel(), offsets, pos, lengths, lookup, block_size,
                                 len(uniq))
    return SampleCurve(rate, hits_at, kept, len(uniq), len(blocks))


@dataclass
class SampledProfile:
    """A sampled analysis: the whole sample's curve, its ``GROUPS`` sub-samples' curves, and the exact
    totals (requests, tokens, accesses) that need no sampling; ``coverage`` = block tokens / prompt tokens."""

    rate: float
    sample: SampleCurve
    groups: list[SampleCurve]
    block_size: int
    num_requests: int
    input_tokens: int
    num_block_accesses: int
    coverage: float

    @property
    def unique_blocks(self) -> int:
        """Estimated distinct blocks of the whole trace."""
        return round(self.sample.kept_blocks / self.rate)

    def hit_rate(self, capacity: int) -> float:
        return self.sample.rate_at(capacity, self.coverage)

    def error(self, capacity: int) -> float:
        """About a 95% interval half-width of ``hit_rate(capacity)`` (absolute hit rate)."""
        rates = [g.rate_at(capacity, self.coverage) for g in self.groups if g.kept_tokens]
        if len(rates) < 2:
            return 1.0
        return 2.0 * float(np.std(rates, ddof=1)) / math.sqrt(len(rates))


class Sampler:
    """Keeps a spatial sample of a trace fed in pieces (``add``: columns, e.g. one file or one shard at a
    time, with the ids blocks are sampled by), so only the kept accesses stay in memory."""

    def __init__(self, rate: float, salt: int = 0) -> None:
        if not 0.0 < rate <= 1.0:
            raise ValueError(f"the sample rate must be in (0, 1], got {rate}")
        self.rate, self.salt = rate, salt
        self.parts: list[tuple[np.ndarray, ...]] = []
        self.requests = self.accesses = self.tokens = self.block_tokens = 0
        self.block_size = 0

    def add(self, cols: TraceColumns, keys: np.ndarray | None = None) -> None:
        keys = block_keys(cols) if keys is None else keys
        h = block_hash(keys, self.salt)[cols.blocks]  # per access, by its block
        keep = np.flatnonzero((h >> np.uint64(64 - _THRESHOLD_BITS)) < np.uint64(int(self.rate * 2**_THRESHOLD_BITS)))
        req = np.searchsorted(cols.offsets, keep, side="right") - 1
        group = ((h[keep] & np.uint64(0xFFFF)) % np.uint64(GROUPS)).astype(np.uint8)
        self.parts.append((keys[cols.blocks[keep]], req + self.requests, (keep - cols.offsets[req]).astype(np.int64),
                           group, cols.input_tokens, cols.lookup_blocks))
        nblocks = np.diff(cols.offsets)
        self.block_tokens += int(np.minimum(nblocks * cols.block_size, cols.input_tokens).sum())
        self.tokens += int(cols.input_tokens.sum())
        self.requests += cols.num_requests
        self.accesses += cols.num_accesses
        self.block_size = cols.block_size

    def finish(self) -> SampledProfile:
        keys, req, pos, group, lengths, lookup = (np.concatenate([p[i] for p in self.parts]) for i in range(6))
        self.parts.clear()
        bs = self.block_size
        sample = _curve(keys, req, pos, lengths, lookup, bs, self.rate)
        groups = []
        for g in range(GROUPS):
            m = group == g
            groups.append(_curve(keys[m], req[m], pos[m], lengths, lookup, bs, self.rate / GROUPS))
        return SampledProfile(self.rate, sample, groups, bs, self.requests, self.tokens, self.accesses,
                              self.block_tokens / self.tokens if self.tokens else 0.0)


def analyze_sampled(cols: TraceColumns, rate: float, salt: int = 0) -> SampledProfile:
    """Sample ``cols`` at ``rate`` (0 < rate <= 1) by block and estimate the curve with its error."""
    sampler = Sampler(rate, salt)
    sampler.add(cols)
    return sampler.finish()


def sampled_report(sp: SampledProfile, capacities: list[int] | None = None,
                   bytes_per_token: Fraction | None = None, points: int = 60) -> dict[str, Any]:
    """The CLI's JSON for a sampled analysis: the exact report's keys (hit numbers estimated), plus
    ``sampled``, ``sample_rate``, ``hit_rate_error`` (the largest over the curve) and a per-point error."""
    total, bs = sp.input_tokens, sp.block_size
    caps = capacities if capacities is not None else log_grid(max(sp.unique_blocks, 1), points)
    rows = []
    for c in sorted(set(caps)):
        rate = sp.hit_rate(c)
        row: dict[str, Any] = {"capacity_blocks": c, "capacity_tokens": c * bs, "hit_tokens": round(rate * total),
                               "hit_rate": rate}
        if bytes_per_token is not None:
            row["capacity_bytes"] = int(bytes_per_token * c * bs)
        row["hit_rate_error"] = sp.error(c)
        rows.append(row)
    inf = sp.hit_rate(sp.unique_blocks * 4 + 1)
    fine = log_grid(max(sp.unique_blocks, 1), 400)

    def need(fraction: float) -> int:
        return next((c for c in fine if sp.hit_rate(c) >= fraction * inf - 1e-12), 0) if inf > 0 else 0

    out: dict[str, Any] = {
        "num_requests": sp.num_requests, "input_tokens": total, "block_size": bs,
        "num_block_accesses": sp.num_block_accesses, "unique_blocks": sp.unique_blocks,
        "hit_tokens_infinite": round(inf * total), "hit_rate_infinite": inf,
        "capacity_for_50pct_of_max_blocks": need(0.5), "capacity_for_90pct_of_max_blocks": need(0.9),
        "curve": rows, "sampled": True, "sample_rate": sp.rate,
        "hit_rate_error": max((r["hit_rate_error"] for r in rows), default=0.0),
        "sampled_blocks": sp.sample.kept_blocks, "sampled_block_accesses": sp.sample.kept_accesses,
        "resolved_from_capacity_blocks": math.ceil(1 / sp.rate),
    }
    if bytes_per_token is not None:
        out["bytes_per_token"] = float(bytes_per_token) if bytes_per_token.denominator != 1 else int(bytes_per_token)
    return out
