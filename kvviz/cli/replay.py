"""``python -m kvviz replay TRACE --url URL``: send a trace's requests to an OpenAI-compatible server at
their timestamps; print the measured prefix-cache hit rate beside the workload analyzer's prediction for
the server's pool size (kvviz.server.replay_client)."""

from __future__ import annotations

import argparse
import math
from typing import Any

from kvviz.analysis.workload.trace import MAX_TRACE_BYTES, WorkloadError
from kvviz.cli import CliError, add_json_flag
from kvviz.settings import settings
from kvviz.util.jsonio import read_limited

MAX_TOKENS_LIMIT = 4096
MAX_REQUESTS = 100_000


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replay", help="replay a JSONL trace against an OpenAI-compatible server; measured vs predicted hit rate",
        description="Send each line of a JSONL trace (Mooncake hash_ids, OpenAI chat messages, prompt or "
        "token_ids) at its timestamp and compare the measured cached-token share with the workload analyzer's "
        "prediction for the server's pool (read from its /metrics).")
    p.add_argument("trace", metavar="TRACE", help="the JSONL trace")
    p.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8000")
    p.add_argument("--api-key", help="Authorization: Bearer KEY (default KVVIZ_API_KEY)")
    p.add_argument("--model", help="model name to send (default: none, the server's own)")
    p.add_argument("--tokens-per-hash", type=int, metavar="N",
                   help="tokens per Mooncake hash id (default: the server's block size)")
    p.add_argument("--max-tokens", type=int, default=8, metavar="N",
                   help="cap on each answer (default 8; the trace's output_length when smaller)")
    p.add_argument("--speedup", type=float, default=1.0, help="divide every arrival time by this (default 1)")
    p.add_argument("--limit", type=int, metavar="N", help="send only the first N requests")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _check(args: argparse.Namespace) -> None:
    if not 1 <= args.max_tokens <= MAX_TOKENS_LIMIT:
        raise CliError(f"--max-tokens must be in 1..{MAX_TOKENS_LIMIT}, got {args.max_tokens}")
    if not math.isfinite(args.speedup) or not 0.001 <= args.speedup <= 1e6:
        raise CliError(f"--speedup must be in 0.001..1000000, got {args.speedup}")
    if args.limit is not None and not 1 <= args.limit <= MAX_REQUESTS:
        raise CliError(f"--limit must be in 1..{MAX_REQUESTS:,}, got {args.limit}")
    if args.tokens_per_hash is not None and not 1 <= args.tokens_per_hash <= 4096:
        raise CliError(f"--tokens-per-hash must be in 1..4096, got {args.tokens_per_hash}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    _check(args)
    from kvviz.server import replay_client as rc

    key = (args.api_key or "").strip() or (settings().api_key or "")
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    try:
        raw = read_limited(args.trace, MAX_TRACE_BYTES, "trace file", WorkloadError)
        block_size, num_blocks = rc.pool_of(args.url, headers)
        sends, predicted_trace = rc.plan(raw, args.tokens_per_hash or block_size, args.max_tokens, args.model,
                                         args.speedup, args.limit)
        if len(sends) > MAX_REQUESTS:
            raise CliError(f"the trace has more than {MAX_REQUESTS:,} requests: use --limit")
        result = rc.run(args.url, sends, headers)
        prediction = rc.predict(predicted_trace, block_size, num_blocks, result.peak_in_flight)
    except (WorkloadError, ValueError, OSError) as exc:
        raise CliError(str(exc)) from None
    ttft = sorted(result.ttft_s)
    return {
        "requests": result.requests, "ok": result.ok, "errors": result.errors,
        "measured_hit_rate": round(result.hit_rate, 4), "prompt_tokens": result.prompt_tokens,
        "cached_tokens": result.cached_tokens,
        "predicted_pool_hit_rate": round(prediction["pool_hit_rate"], 4),
        "predicted_lru_hit_rate": round(prediction["lru_hit_rate"], 4),
        "infinite_cache_hit_rate": round(prediction["infinite_cache_hit_rate"], 4),
        "pool_blocks": prediction["capacity_blocks"], "block_size": block_size,
        "concurrency": prediction["pool_concurrency"], "duration_s": round(result.duration_s, 3),
        "median_latency_s": round(ttft[len(ttft) // 2], 4) if ttft else None,
    }
