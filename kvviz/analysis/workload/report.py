"""What the workload page and ``python -m kvviz workload`` report: curve points, trace statistics,
top shared prefixes, the TTL summary. One function per figure; the page and the CLI share them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from fractions import Fraction
from typing import Any

import numpy as np

from kvviz.analysis.workload.columns import TraceColumns, as_columns
from kvviz.analysis.workload.reuse_distance import WorkloadProfile, log_grid
from kvviz.analysis.workload.trace import WorkloadTrace

DEFAULT_GRID_POINTS = 60
MAX_CAPACITIES = 10_000


@dataclass(frozen=True)
class CurvePoint:
    """Hit tokens and rate with an LRU cache of ``capacity_blocks`` (bytes when a model is given)."""

    capacity_blocks: int
    capacity_tokens: int
    hit_tokens: int
    hit_rate: float
    capacity_bytes: int | None = None
    ttl_hit_tokens: int | None = None
    ttl_hit_rate: float | None = None


def parse_capacities(text: str) -> list[int]:
    """``"A,B,..."`` as sorted distinct positive integers; ValueError naming the bad entry."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise ValueError("capacities are empty: give positive integers such as 1000,10000")
    out = set()
    for p in parts:
        if not p:
            continue
        if not p.isdigit() or int(p) <= 0 or len(p) > 15:
            raise ValueError(f"capacity {p!r} is not a positive integer (blocks)")
        out.add(int(p))
    if len(out) > MAX_CAPACITIES:
        raise ValueError(f"at most {MAX_CAPACITIES:,} capacities")
    return sorted(out)


def curve(profile: WorkloadProfile, capacities: list[int] | None = None,
          bytes_per_token: Fraction | None = None, points: int = DEFAULT_GRID_POINTS) -> list[CurvePoint]:
    """Curve points at ``capacities`` (a log-spaced grid up to the unique blocks when None)."""
    caps = capacities if capacities is not None else log_grid(profile.unique_blocks, points)
    bs, total, ttl = profile.block_size, profile.input_tokens, profile.ttl_hits_at is not None
    out = []
    for c in sorted(set(caps)):
        hit = profile.hit_tokens(c)
        ttl_hit = profile.hit_tokens(c, ttl=True) if ttl else None
        out.append(CurvePoint(
            capacity_blocks=c, capacity_tokens=c * bs, hit_tokens=hit,
            hit_rate=hit / total if total else 0.0,
            capacity_bytes=int(bytes_per_token * c * bs) if bytes_per_token is not None else None,
            ttl_hit_tokens=ttl_hit,
            ttl_hit_rate=(ttl_hit / total if total else 0.0) if ttl_hit is not None else None,
        ))
    return out


def trace_stats(trace: WorkloadTrace | TraceColumns, profile: WorkloadProfile) -> dict[str, Any]:
    """Requests, tokens, blocks, span: the numbers beside the curve."""
    cols = as_columns(trace)
    lengths = np.sort(cols.input_tokens)
    n = len(lengths)
    return {
        "num_requests": profile.num_requests,
        "input_tokens": profile.input_tokens,
        "output_tokens": int(cols.output_tokens.sum()),
        "block_size": profile.block_size,
        "num_block_accesses": profile.num_block_accesses,
        "unique_blocks": profile.unique_blocks,
        "reused_block_accesses": profile.num_block_accesses - profile.cold_accesses,
        "median_input_tokens": int(lengths[n // 2]) if n else 0,
        "max_input_tokens": int(lengths[-1]) if n else 0,
        "duration_s": float(cols.timestamps[-1] - cols.timestamps[0]) / 1000.0 if cols.has_timestamps else None,
        "line_kinds": sorted(cols.kinds),
    }


@dataclass(frozen=True)
class PrefixNode:
    """One block of a shared prefix: tokens it saved at the infinite cache and how many requests hit it.
    ``parent`` is -1 for a first block; a child never saves more than its parent."""

    block: int
    parent: int
    depth: int
    label: str
    saved_tokens: int
    hits: int


def top_prefixes(trace: WorkloadTrace | TraceColumns, profile: WorkloadProfile, k: int = 40) -> list[PrefixNode]:
    """The ``k`` blocks that saved the most tokens (ties: the block seen first), with all their ancestors
    (a tree, roots first)."""
    cols = as_columns(trace)
    saved = profile.block_saved_tokens
    cand = np.flatnonzero(saved > 0)
    best = cand[np.lexsort((cand, -saved[cand]))[:k]].tolist()
    parent = cols.parent
    keep: set[int] = set()
    for b in best:
        while b >= 0 and b not in keep:
            keep.add(b)
            b = int(parent[b])
    depth: dict[int, int] = {}

    def depth_of(b: int) -> int:
        chain = []
        while b >= 0 and b not in depth:
            chain.append(b)
            b = int(parent[b])
        d = depth.get(b, 0)
        for c in reversed(chain):
            d += 1
            depth[c] = d
        return depth[chain[0]] if chain else d

    nodes = [PrefixNode(b, int(parent[b]), depth_of(b), cols.label(b), int(saved[b]), int(profile.block_hits[b]))
             for b in keep]
    return sorted(nodes, key=lambda n: (n.depth, -n.saved_tokens, n.block))


def ttl_summary(profile: WorkloadProfile) -> dict[str, Any] | None:
    if profile.ttl_hits_at is None or profile.ttl_ms is None:
        return None
    hit = int(profile.ttl_hits_at[-1])
    return {"ttl_seconds": profile.ttl_ms / 1000.0, "hit_tokens_infinite": hit,
            "hit_rate_infinite": hit / profile.input_tokens if profile.input_tokens else 0.0}


def report(trace: WorkloadTrace | TraceColumns, profile: WorkloadProfile, capacities: list[int] | None = None,
           bytes_per_token: Fraction | None = None) -> dict[str, Any]:
    """The CLI's JSON object (and the page's download)."""
    out = trace_stats(trace, profile)
    out["hit_tokens_infinite"] = profile.hit_tokens_infinite
    out["hit_rate_infinite"] = profile.hit_rate_infinite
    out["capacity_for_50pct_of_max_blocks"] = profile.capacity_for(0.5)
    out["capacity_for_90pct_of_max_blocks"] = profile.capacity_for(0.9)
    points = curve(profile, capacities, bytes_per_token)
    rows = []
    for p in points:
        row = {k: v for k, v in asdict(p).items() if v is not None and not k.startswith("ttl_")}
        if p.ttl_hit_tokens is not None:
            row["ttl_hit_tokens"], row["ttl_hit_rate"] = p.ttl_hit_tokens, p.ttl_hit_rate
        rows.append(row)
    out["curve"] = rows
    ttl = ttl_summary(profile)
    if ttl is not None:
        out["ttl"] = ttl
    if bytes_per_token is not None:
        out["bytes_per_token"] = float(bytes_per_token) if bytes_per_token.denominator != 1 else int(bytes_per_token)
    return out


def timeline(trace: WorkloadTrace, hits: list[int], reference: list[int],
             slices: int = 60) -> tuple[list[float], list[float], list[float], bool]:
    """Hit rate per slice of the trace (by time in minutes when every line has a timestamp, else by
    request number): ``(slice centres, rate of hits, rate of reference, by_time)``."""
    reqs = trace.requests
    n = len(reqs)
    by_time = trace.has_timestamps and reqs[-1].timestamp_ms != reqs[0].timestamp_ms  # type: ignore[operator]
    if by_time:
        t0 = reqs[0].timestamp_ms or 0.0
        span = (reqs[-1].timestamp_ms or 0.0) - t0
        key = [min(int(((r.timestamp_ms or 0.0) - t0) / span * slices), slices - 1) for r in reqs]
    else:
        key = [min(i * slices // max(n, 1), slices - 1) for i in range(n)]
    tok, a, b = [0] * slices, [0] * slices, [0] * slices
    for i, r in enumerate(reqs):
        tok[key[i]] += r.input_tokens
        a[key[i]] += hits[i]
        b[key[i]] += reference[i]
    xs, ra, rb = [], [], []
    for s in range(slices):
        if tok[s] == 0:
            continue
        if by_time:
            xs.append((s + 0.5) * span / slices / 60000.0)
        else:
            xs.append((s + 0.5) * n / slices)
        ra.append(a[s] / tok[s])
        rb.append(b[s] / tok[s])
    return xs, ra, rb, by_time
