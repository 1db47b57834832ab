"""``python -m kvviz diff``: which blocks of prompt B hit, miss or are invalidated after prompt A."""

from __future__ import annotations

import argparse
from typing import Any

from kvviz.analysis.prompt_compare import compare_prompts
from kvviz.cli import CliError, add_json_flag
from kvviz.cli.hash import add_hash_options, check_hash_options, parse_token_list, tokens_from_text
from kvviz.words import render_block_reason


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "diff",
        help="compare two prompts block by block (hit / miss / invalidated / partial)",
        description="Fill a prefix cache with prompt A, then look up prompt B: per block of B, "
        "whether it hits, misses, is invalidated by an earlier change (the chain cascade) or is a "
        "partial block, plus how many tokens are reused and recomputed.",
    )
    p.add_argument("--a-tokens", help="prompt A as token ids, e.g. 1,2,3")
    p.add_argument("--b-tokens", help="prompt B as token ids")
    p.add_argument("--a", dest="a_text", help="prompt A as text (embedded model's tokenizer)")
    p.add_argument("--b", dest="b_text", help="prompt B as text")
    add_hash_options(p)
    p.add_argument("--salt-a", default=None, help="cache salt of prompt A")
    p.add_argument("--salt-b", default=None, help="cache salt of prompt B")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _prompt(args: argparse.Namespace, side: str) -> list[int]:
    tokens = getattr(args, f"{side}_tokens")
    text = getattr(args, f"{side}_text")
    if tokens is not None and text is not None:
        raise CliError(f"give prompt {side.upper()} either as --{side}-tokens or as --{side}, not both")
    if tokens is not None:
        return parse_token_list(tokens, f"--{side}-tokens")
    if text is not None:
        return tokens_from_text(text, f"--{side}")[0]
    raise CliError(f"prompt {side.upper()} is missing: pass --{side}-tokens or --{side}")


def run(args: argparse.Namespace) -> dict[str, Any]:
    _, seed = check_hash_options(args)
    a = _prompt(args, "a")
    b = _prompt(args, "b")
    try:
        cmp = compare_prompts(a, b, args.block_size, args.hash, seed, args.salt_a, args.salt_b)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    return {
        "common_prefix_tokens": cmp.common_prefix_tokens,
        "reused_tokens": cmp.reused_tokens,
        "recompute_tokens": cmp.recompute_tokens,
        "first_changed_token": cmp.first_changed_token,
        "num_tokens_a": cmp.num_tokens_a,
        "num_tokens_b": cmp.num_tokens_b,
        "blocks": [
            {
                "index": blk.index,
                "status": blk.status,
                "hash_a": blk.hash_a.hex() if blk.hash_a is not None else None,
                "hash_b": blk.hash_b.hex() if blk.hash_b is not None else None,
                "code": blk.code,
                "params": blk.params,
                "reason": render_block_reason(blk.code, blk.params),
            }
            for blk in cmp.blocks
        ],
    }
