"""``python -m kvviz scenario``: the block-table scenario player's state at one step, or the radix tree
vs hash chain vs sliding-window comparison over the same scenario.

Calls the same functions the "Block table and LRU free queue" and "Radix tree vs hash chain" pages
call (``kvviz.analysis.scenarios.play.play_scenario(...).view_at(k)`` and
``kvviz.analysis.radix_compare.compare_radix_pool``).
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from kvviz.analysis.radix_compare import DEFAULT_WINDOW, compare_radix_pool
from kvviz.analysis.scenarios.load import (
    MAX_SCENARIO_BLOCKS,
    MAX_SCENARIO_BYTES,
    builtin_names,
    load_builtin,
    load_scenario,
    parse_scenario_text,
)
from kvviz.analysis.scenarios.play import play_scenario, step_summary
from kvviz.analysis.scenarios.records import MAX_REQUEST_TOKENS, ScenarioError
from kvviz.cli import CliError, add_json_flag
from kvviz.util.jsonio import read_stream_limited


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "scenario",
        help="block tables, pool, free queue and events at one step of a scenario",
        description="Play a scenario (requests arrive, decode, finish) through the block manager and print "
        "the state at --step K (default: after the last step): every running request's block table, the "
        "pool (state, ref_cnt, hash of each block), the free queue head first, the events of that step and "
        "the counters. With --radix: the same history in a radix tree, the block pool and the "
        "sliding-window hit search, per request and per eviction.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--name", help=f"a built-in scenario: {', '.join(builtin_names())}")
    src.add_argument("--file", metavar="FILE",
                     help="a scenario or trace JSON file ('-' reads stdin); steps with text but no tokens "
                     "are tokenized with the embedded model's tokenizer")
    src.add_argument("--list", action="store_true", help="list the built-in scenarios")
    p.add_argument("--step", type=int, help="the step to show, 0 (empty pool) .. number of steps (default: last)")
    p.add_argument("--radix", action="store_true", help="compare radix tree, block pool and sliding window")
    p.add_argument("--window", type=int, default=DEFAULT_WINDOW,
                   help=f"sliding window in tokens for --radix (default {DEFAULT_WINDOW})")
    p.add_argument("--page-size", type=int, default=1, help="radix page size in tokens for --radix (default 1)")
    p.add_argument("--host-blocks", type=_host_blocks_arg, default=None, metavar="N",
                   help=f"replay over a host tier of N blocks (1..{MAX_SCENARIO_BLOCKS}) under the pool, as vLLM "
                   "0.33.0's CPU offloading: blocks are copied there as they are computed and copied back when "
                   "the pool lost them; prints host memory and each prompt's tokens by source (default: none)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _host_blocks_arg(text: str) -> int:
    """argparse type for ``--host-blocks``: an integer in 1..MAX_SCENARIO_BLOCKS (a scenario draws every block)."""
    if not text.strip().isdigit() or not 1 <= int(text) <= MAX_SCENARIO_BLOCKS:
        raise argparse.ArgumentTypeError(f"expected an integer in 1..{MAX_SCENARIO_BLOCKS}, got {text!r}")
    return int(text)


def _load(args: argparse.Namespace):
    if args.name is not None:
        return load_builtin(args.name)
    if args.file == "-":
        raw = read_stream_limited(sys.stdin, MAX_SCENARIO_BYTES, "scenario", error=ScenarioError)
        return parse_scenario_text(raw, "stdin", _LazyTokenizer(), where="stdin")
    return load_scenario(args.file, _LazyTokenizer())


class _LazyTokenizer:
    """Loads the embedded tokenizer only when a step needs it (most files carry token ids)."""

    def __init__(self) -> None:
        self._tok = None

    def __call__(self, text: str):
        if self._tok is None:
            from kvviz.model.tokens import pieces_tokenizer  # loads transformers: only when needed

            # one token over the step limit, so parsing rejects a text that is too long
            self._tok = pieces_tokenizer(MAX_REQUEST_TOKENS + 1)
        return self._tok(text)


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.list:
        scenarios = []
        for name in builtin_names():
            s = load_builtin(name)
            scenarios.append({"name": name, "title": s.title, "num_steps": s.num_steps,
                              "num_blocks": s.num_blocks, "block_size": s.block_size})
        return {"scenarios": scenarios}
    try:
        scenario = _load(args)
        if args.host_blocks is not None:
            if args.radix:
                raise CliError("--host-blocks: --radix compares the device pool alone, without a host tier")
            scenario = scenario.with_host_tier(args.host_blocks)
        if args.radix:
            comparison = compare_radix_pool(scenario, args.window, args.page_size)
            if args.step is not None:
                comparison.check_step(args.step)
            return comparison.to_dict(args.step)
        run_ = play_scenario(scenario)
        k = run_.num_steps if args.step is None else run_.check_step(args.step)
        view = run_.view_at(k)
        out = view.to_dict()
        out["summary"] = step_summary(view.action)
        if scenario.host_blocks:
            out["prompts_by_source"] = [r.to_dict() for r in run_.hits_by_source(k)]
        return out
    except ScenarioError as exc:
        raise CliError(str(exc)) from exc
