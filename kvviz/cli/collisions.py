"""``python -m kvviz collisions``: Python's hash in fresh processes, NONE_HASH under a fixed and a random
seed, a forced collision with a truncated toy hash, and each hash function's measured cost."""

from __future__ import annotations

import argparse
from typing import Any

from kvviz.cli import CliError, add_json_flag, check_model_option
from kvviz.experiments.security.collisions import MAX_TOY_BITS, MIN_TOY_BITS


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "collisions",
        help="why block hashes are SHA-256 over CBOR: Python's hash, NONE_HASH, a forced collision, costs",
        description="Measures what the collisions page shows. The forced collision keeps only --bits bits of "
        "SHA-256 over CBOR and searches for a different first block of prompt B with prompt A's toy hash; "
        "--leak also prefills B on the real model with A's K/V for the served block.",
    )
    p.add_argument("--bits", type=int, default=16, help=f"toy hash size in bits ({MIN_TOY_BITS}..{MAX_TOY_BITS}, default 16)")
    p.add_argument("--a", default=None, help="prompt A (the victim's); default: the page's example")
    p.add_argument("--b", default=None, help="prompt B (the attacker's); default: the page's example")
    p.add_argument("--blocks", type=int, default=2000, help="blocks hashed per cost measurement (default 2000)")
    p.add_argument("--repeats", type=int, default=5, help="runs per hash function, best kept (default 5)")
    p.add_argument("--leak", action="store_true", help="run the model: what B's prefill says with A's K/V")
    p.add_argument("--model", default=None, help="'embedded' (default), a Hugging Face id, or a local folder")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_model_option(args.model)
    if not MIN_TOY_BITS <= args.bits <= MAX_TOY_BITS:
        raise CliError(f"--bits must be between {MIN_TOY_BITS} and {MAX_TOY_BITS}, got {args.bits}")
    if not 1 <= args.blocks <= 1_000_000:
        raise CliError(f"--blocks must be between 1 and 1000000, got {args.blocks}")
    if not 1 <= args.repeats <= 100:
        raise CliError(f"--repeats must be between 1 and 100, got {args.repeats}")
    from kvviz.experiments.security.collisions import (
        DEFAULT_PROMPT_A,
        DEFAULT_PROMPT_B,
        force_collision,
        measure_hash_costs,
        none_hash_demo,
        python_hash_facts,
    )
    from kvviz.model import InputError, ModelLoadError, load_tokenizer, tokenize

    text_a = DEFAULT_PROMPT_A if args.a is None else args.a
    text_b = DEFAULT_PROMPT_B if args.b is None else args.b
    try:
        ids_a = tokenize(text_a, model_name=args.model, max_tokens=256).ids
        ids_b = tokenize(text_b, model_name=args.model, max_tokens=256).ids
        vocab = len(load_tokenizer(args.model))
        demo = force_collision(ids_a, ids_b, bits=args.bits, vocab_size=vocab)
        none = none_hash_demo(ids_b)
    except (InputError, ModelLoadError, ValueError) as exc:
        raise CliError(f"prompt: {str(exc).strip().splitlines()[0]}") from exc
    facts = python_hash_facts()
    out: dict[str, Any] = {
        "python_version": facts.python_version,
        "python_hash": {r.expr: {"process_1": r.run1, "process_2": r.run2, "same": r.same} for r in facts.rows},
        "none_hash": {"seed0_equal": none.seeded_equal, "random_all_differ": none.random_all_differ,
                      **{f"root_{k}": v.hex()[:16] for k, v in none.roots.items()}},
        "collision": demo.as_dict(),
        "hash_costs": [c.as_dict() for c in measure_hash_costs(args.blocks, repeats=args.repeats)],
    }
    if args.leak:
        if not demo.found:
            raise CliError(f"no collision within {demo.tries:,} tries; use fewer --bits")
        from kvviz.experiments.security.collision_leak import collision_leak
        from kvviz.model import load_model

        try:
            out["leak"] = collision_leak(load_model(args.model), demo).as_dict()
        except (InputError, ModelLoadError) as exc:
            raise CliError(str(exc).strip().splitlines()[0]) from exc
    return out
