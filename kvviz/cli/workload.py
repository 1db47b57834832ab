"""``python -m kvviz workload``: the prefix-cache hit rate a request trace gets at every LRU capacity.

The same functions the "Your traffic" page calls (kvviz.workload.load, kvviz.workload.reuse_distance,
kvviz.workload.report). One pass gives the exact curve; see kvviz.workload.reuse_distance.
"""

from __future__ import annotations

import argparse
import math
from fractions import Fraction
from typing import Any

from kvviz.cli import CliError, add_json_flag
from kvviz.core import kv_formula, kvsize
from kvviz.core.hf_config import load_config_file
from kvviz.core.jsonio import read_limited
from kvviz.core.kvsize import KVSizeError
from kvviz.core.presets import get_preset
from kvviz.text.calculator_config import size_error
from kvviz.workload.load import load_trace
from kvviz.workload.report import parse_capacities, report
from kvviz.workload.reuse_distance import analyze
from kvviz.workload.trace import MAX_TRACE_BYTES, WorkloadError

MAX_TTL_SECONDS = 10**9


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "workload",
        help="hit rate of a request trace at every LRU cache capacity (one pass, exact)",
        description="Read a JSON Lines trace (Mooncake hash_ids lines, token_ids, prompt or OpenAI "
        "messages lines, one request a line, in arrival order) and report the prefix-cache hit rate an LRU "
        "cache of each capacity would get, the infinite-cache maximum, and optionally a TTL policy.",
    )
    p.add_argument("--trace", required=True, metavar="FILE", help="the JSONL trace")
    p.add_argument("--block-size", type=int, help="tokens per block (default 512 for hash_ids, 16 otherwise)")
    p.add_argument("--capacities", help="capacities in blocks, e.g. 1000,10000 (default: a log-spaced grid)")
    p.add_argument("--ttl-seconds", type=float, help="also report a TTL policy (needs timestamps)")
    p.add_argument("--preset", help="model preset: adds capacity_bytes (see `bytes --list-presets`)")
    p.add_argument("--config", metavar="FILE", help="a Hugging Face config.json: adds capacity_bytes")
    p.add_argument("--dtype", help=f"KV dtype for bytes: {', '.join(kvsize.DTYPES)} (default fp16)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _bytes_per_token(args: argparse.Namespace) -> Fraction | None:
    if args.preset is not None and args.config is not None:
        raise CliError("give one model, not --preset and --config")
    if args.preset is None and args.config is None:
        if args.dtype is not None:
            raise CliError("--dtype needs a model: --preset NAME or --config FILE")
        return None
    try:
        shape = get_preset(args.preset).shape() if args.preset is not None else load_config_file(args.config).shape
        return kv_formula.bytes_per_token(shape, args.dtype or "fp16")
    except KVSizeError as exc:
        raise CliError(size_error(exc)) from None


def run(args: argparse.Namespace) -> dict[str, Any]:
    capacities = None
    if args.capacities is not None:
        try:
            capacities = parse_capacities(args.capacities)
        except ValueError as exc:
            raise CliError(f"--capacities: {exc}") from None
    ttl = args.ttl_seconds
    if ttl is not None and (not math.isfinite(ttl) or not 0 < ttl <= MAX_TTL_SECONDS):
        raise CliError(f"--ttl-seconds must be a positive number of seconds (at most {MAX_TTL_SECONDS:,})")
    bpt = _bytes_per_token(args)
    try:
        raw = read_limited(args.trace, MAX_TRACE_BYTES, "trace file", WorkloadError)
        trace = load_trace(raw, args.block_size)
        if ttl is not None and not trace.has_timestamps:
            missing = next(i for i, r in enumerate(trace.requests) if r.timestamp_ms is None)
            raise WorkloadError(f"--ttl-seconds needs a timestamp on every line (request {missing + 1} has none)",
                                "ttl_needs_timestamps", request=missing + 1)
        profile = analyze(trace, ttl)
    except WorkloadError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    return report(trace, profile, capacities, bpt)
