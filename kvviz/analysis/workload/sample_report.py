"""The CLI's JSON for a sampled analysis (kvviz.analysis.workload.sample): the exact report's keys, the hit
numbers estimated, with the error bar per curve point and the largest from the resolved capacity up."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from kvviz.analysis.workload.reuse_distance import log_grid
from kvviz.analysis.workload.sample import SampledProfile


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
        "hit_rate_error": max((r["hit_rate_error"] for r in rows if r["capacity_blocks"] >= sp.resolved_from),
                              default=0.0),
        "sampled_blocks": sp.kept_blocks, "sampled_block_accesses": sp.kept_accesses,
        "resolved_from_capacity_blocks": sp.resolved_from,
    }
    if bytes_per_token is not None:
        out["bytes_per_token"] = float(bytes_per_token) if bytes_per_token.denominator != 1 else int(bytes_per_token)
    return out
