"""``python -m kvviz session``: per-turn cache reads, writes and uncached input of a chat or agent session.

Calls the same function the "Multi-turn sessions" page calls (kvviz.experiments.sessions.run_session) on
real token counts from the embedded model's tokenizer.
"""

from __future__ import annotations

import argparse
from typing import Any

from kvviz.analysis.providers import DEFAULT_POLICY, POLICIES
from kvviz.cli import CliError, add_block_size_flag, add_json_flag
from kvviz.experiments.sessions import (
    DEFAULT_PAUSE_S,
    MARKS,
    SessionError,
    SessionEvents,
    example_names,
    load_example,
    load_session_file,
    projected_work,
    run_session,
    session_increment,
)
from kvviz.experiments.sessions.results import MAX_PROJECTION_TURNS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "session",
        help="a multi-turn chat/agent session: per-turn cache read / written / uncached tokens",
        description="Run a session (a built-in --example or a JSON --file) through the block manager "
        "(--policy vllm) or a provider's cache policy, with optional events, and report per turn "
        "cache_read_input_tokens, cache_creation_input_tokens and input_tokens.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--example", help=f"a built-in session: {', '.join(example_names())}")
    src.add_argument("--file", metavar="FILE", help="a session JSON file (format of assets/sessions)")
    p.add_argument("--policy", default=DEFAULT_POLICY, choices=list(POLICIES), help="engine or provider policy")
    add_block_size_flag(p)
    p.add_argument("--marks", default=",".join(MARKS),
                   help=f"explicit checkpoints, comma-separated from: {', '.join(MARKS)} (empty = none)")
    p.add_argument("--min-cacheable", type=int, help="minimum cacheable prompt in tokens (default: the policy's)")
    p.add_argument("--ttl", type=float, help="entry lifetime in seconds (default: the policy's)")
    p.add_argument("--restart-tools-at", type=int, help="event: restart with a changed tool list at this turn")
    p.add_argument("--file-read-at", type=int, help="event: a file read lands at the end of this turn")
    p.add_argument("--pause-at", type=int, help="event: a long pause before this turn")
    p.add_argument("--pause-s", type=float, default=DEFAULT_PAUSE_S, help="length of the pause in seconds")
    p.add_argument("--unstable-json", action="store_true", help="event: tool arguments re-serialised in random key order")
    p.add_argument("--project-turns", type=_projection_turns, default=50, metavar="N",
                   help=f"turns of the quadratic-vs-linear projection, 1..{MAX_PROJECTION_TURNS:,}")
    p.add_argument("--segments", action="store_true", help="include each turn's segment spans")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _projection_turns(text: str) -> int:
    """argparse type for ``--project-turns``: checked at parse time, before a session is simulated."""
    try:
        turns = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if not 1 <= turns <= MAX_PROJECTION_TURNS:
        raise argparse.ArgumentTypeError(f"the projection needs 1..{MAX_PROJECTION_TURNS:,} turns, got {turns:,}")
    return turns


def _load(args: argparse.Namespace):
    if args.example is not None:
        return load_example(args.example)
    return load_session_file(args.file)


def run(args: argparse.Namespace) -> dict[str, Any]:
    try:
        session = _load(args)
        marks = tuple(m.strip() for m in args.marks.split(",") if m.strip())
        events = SessionEvents(restart_tools_at=args.restart_tools_at, file_read_at=args.file_read_at,
                               pause_at=args.pause_at, pause_s=args.pause_s, unstable_json=args.unstable_json)
        result = run_session(
            session, args.policy, events, block_size=args.block_size, marks=marks,
            min_cacheable_tokens=args.min_cacheable, ttl_s="policy" if args.ttl is None else args.ttl,
        )
        first, step = session_increment(result)
        without, with_cache = projected_work(first, step, args.project_turns)
    except (SessionError, ValueError) as exc:
        raise CliError(str(exc)) from None
    out = result.to_dict(segments=args.segments)
    out["projection"] = {"turns": args.project_turns, "first_prompt": first, "increment": step,
                         "without_cache": without[-1], "with_cache": with_cache[-1]}
    out["policy_values"] = [
        {"name": v.name, "value": v.value, "source": v.source, "as_of": v.as_of} for v in result.policy.values
    ]
    return out
