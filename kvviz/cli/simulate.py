"""``python -m kvviz simulate``: replay a request trace through the vLLM-style block manager."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kvviz.cli import CliError, add_json_flag
from kvviz.core.trace import TraceError, load_trace, parse_trace, run_trace


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
            try:
                obj = json.loads(sys.stdin.read())
            except UnicodeDecodeError as exc:
                raise TraceError(f"stdin is not UTF-8 text (byte {exc.start})") from None
            except json.JSONDecodeError as exc:
                raise TraceError(f"stdin is not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}") from None
            trace = parse_trace(obj)
        else:
            trace = load_trace(args.trace)
        return run_trace(trace).to_dict()
    except TraceError as exc:
        raise CliError(str(exc)) from exc
