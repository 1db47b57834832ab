"""``python -m kvviz timing``: the timing side channel and the attacker game, measured on the real model
with the same functions the side-channel page calls."""

from __future__ import annotations

import argparse
from typing import Any

from kvviz.cli import CliError, add_json_flag, check_model_option
from kvviz.util.blank import is_blank

SALT_CHOICES = {"off": (False,), "on": (True,), "both": (False, True)}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "timing",
        help="the prefix-cache timing side channel, measured on the real model",
        description="Victim prompt on the engine (each trial in a namespace of its own), then per trial the "
        "attacker times a probe whose prefix is cached and one whose prefix is not, each alone on the engine "
        "(the compute of its prefill; waiting for a quiet engine is not timed). Prints medians, interquartile "
        "ranges, ratio and AUC per salt setting, with the trial count; --game-rounds N also plays the attacker "
        "game (rank candidates by latency).",
    )
    p.add_argument("--trials", type=int, default=10, help="trials per group (1..500, default 10)")
    p.add_argument("--prefix-blocks", type=int, default=4, help="blocks of 16 tokens the probe repeats (default 4)")
    p.add_argument("--salt", choices=sorted(SALT_CHOICES), default="both", help="victim salt off, on, or both (default)")
    p.add_argument("--game-rounds", type=int, default=0, help="also play the attacker game for N rounds (default 0)")
    p.add_argument("--candidates", default=None, help="comma-separated candidates for the game's secret field")
    p.add_argument("--seed", type=int, default=0, help="random seed for probe order and secrets (default 0)")
    p.add_argument("--samples", action="store_true", help="include every probe's latency in the output")
    p.add_argument("--model", default=None, help="'embedded' (default), a Hugging Face id, or a local folder")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_model_option(args.model)
    if not 1 <= args.trials <= 500:
        raise CliError(f"--trials must be between 1 and 500, got {args.trials}")
    if not 1 <= args.prefix_blocks <= 64:
        raise CliError(f"--prefix-blocks must be between 1 and 64, got {args.prefix_blocks}")
    if not 0 <= args.game_rounds <= 200:
        raise CliError(f"--game-rounds must be between 0 and 200, got {args.game_rounds}")
    from kvviz.engine import EngineConfig, EngineLoop, LLMEngine
    from kvviz.errors import CodedError
    from kvviz.experiments.security.attacker import GAME_CANDIDATES, attacker_game
    from kvviz.experiments.security.side_channel import measure_side_channel
    from kvviz.model import InputError, ModelLoadError, load_model  # torch only when needed

    candidates = GAME_CANDIDATES
    if args.candidates is not None:
        candidates = tuple(c.strip() for c in args.candidates.split(",") if not is_blank(c))
    loop = None
    try:
        lm = load_model(args.model)
        loop = EngineLoop(LLMEngine(lm, EngineConfig()))
        runs = [measure_side_channel(loop, trials=args.trials, prefix_blocks=args.prefix_blocks, salted=s,
                                     seed=args.seed) for s in SALT_CHOICES[args.salt]]
        games = [attacker_game(loop, rounds=args.game_rounds, salted=s, candidates=candidates, seed=args.seed)
                 for s in SALT_CHOICES[args.salt]] if args.game_rounds else []
    except (InputError, ModelLoadError, CodedError, ValueError) as exc:
        raise CliError(str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__) from exc
    finally:
        if loop is not None:
            loop.close()
    out: dict[str, Any] = {"model": lm.info.name, "device": lm.info.device, "dtype": lm.info.dtype,
                           "trials": args.trials}
    for r in runs:
        d = r.as_dict()
        if not args.samples:
            d.pop("cached_ms")
            d.pop("uncached_ms")
        out["salted" if r.salted else "unsalted"] = d
    for g in games:
        out["game_salted" if g.salted else "game_unsalted"] = g.as_dict()
    return out
