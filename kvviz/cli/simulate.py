"""``python -m kvviz simulate``: replay a request trace through the vLLM-style block manager."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kvviz.analysis.scenarios.block_trace import (
    MAX_TRACE_BYTES,
    TraceError,
    load_trace,
    parse_trace_text,
    run_trace,
)
from kvviz.cli import CliError, add_json_flag
from kvviz.util.jsonio import read_stream_limited
from kvviz.words import render_event, render_step_error


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "simulate",
        help="replay a JSON request trace through the block manager",
        description="Replay a trace of add (prefilled prompt), append (decoded tokens) and free "
        "(finished) and reset (reset_prefix_cache) steps through the block pool and print, per step, the prefix-cache hit, the new "
        "and evicted blocks, vLLM's KV-cache events (BlockStored, BlockRemoved, AllBlocksCleared) and "
        "prefix-cache counters (queries and hits, in tokens), and the final free queue (head first), "
        "cached blocks and ref counts. Block 0 is vLLM's null block. "
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
        out = run_trace(trace).to_dict()
    except TraceError as exc:
        raise CliError(str(exc)) from exc
    for step in out["steps"]:  # the words beside the codes, for a reader of the JSON
        if step["error"]:
            step["reason"] = render_step_error(step["error"], step["error_params"])
        for event in step["events"]:
            event["reason"] = render_event(event["code"], event["params"])
    return out
