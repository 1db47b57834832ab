"""``python -m kvviz simulate``: replay a request trace through the vLLM-style block manager."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kvviz.cli import CliError, add_json_flag
from kvviz.core.jsonio import read_stream_limited
from kvviz.core.trace import MAX_TRACE_BYTES, TraceError, load_trace, parse_trace_text, run_trace


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a JSON request trace through the block manager",
        description="Replay a trace of add (prefilled prompt), append (decoded tokens) and free "
        "(finished) steps through the block pool and print, per step, the prefix-cache hit, the new "
        "and evicted blocks, and the final free queue (head first), cached blocks and ref counts. "
        "Examples live in assets/traces/.",
    )
    p.add_argument("--trace", required=True, help="trace JSON file ('-' reads stdin)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    try:
        if args.trace == "-":
            raw = read_stream_limited(sys.stdin, MAX_TRACE_BYTES, "trace", error=TraceError)
            trace = parse_trace_text(raw, "stdin")
        else:
            trace = load_trace(args.trace)
        return run_trace(trace).to_dict()
    except TraceError as exc:
        raise CliError(str(exc)) from exc
