"""``python -m kvviz watch``: subscribe to an engine's (or a fleet's) KV-cache events and summarise what
it caches.

Same subscriber and engine model as the "Live engine" page. ``--endpoint`` connects to an engine that
binds (vLLM given ``tcp://*:PORT``); ``--listen`` binds here for an engine that connects (vLLM given a
specific address such as ``tcp://127.0.0.1:5800``). Stops after ``--batches`` distinct
batches (live and replayed; in a fleet: on every replica) or ``--seconds``; an endpoint where nobody
publishes gives ``batches: 0``. Several ``--endpoint`` (or one ``NAME=URL``) watch a fleet
(``kvviz.cli.watch_fleet``).
"""

from __future__ import annotations

import argparse
from typing import Any

from kvviz.cli import CliError, add_json_flag
from kvviz.cli.hash import add_request_key_options, check_request_keys, parse_token_list, tokens_from_text
from kvviz.cli.watch_fleet import is_fleet, run_fleet
from kvviz.fleet.engine_http import EngineHTTPError, tokenize_remote
from kvviz.fleet.engine_model import hash_label
from kvviz.fleet.subscriber import MAX_DP_SIZE, LiveConfig, Subscriber, check_prompt
from kvviz.mirror import limits
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, HASH_FUNCTIONS, REFERENCE_RELEASE, get_hash_fn

DEFAULT_SECONDS = 5.0
DEFAULT_TIMEOUT = 30.0
MAX_SECONDS = 24 * 3600.0
MAX_BATCHES = 10_000_000


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "watch",
        help="subscribe to a vLLM engine's KV-cache events (ZeroMQ) and summarise its prefix cache",
        description="Connect a SUB socket to the engine's KV-event endpoint (vLLM --kv-events-config), "
        "or listen for an engine that connects, replay what was missed from its replay endpoint, and print "
        "what the engine caches now. With a prompt, tell which of its blocks the engine holds.",
    )
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--endpoint", action="append",
                       help="connect to the engine's PUB endpoint (vLLM endpoint tcp://*:PORT binds), e.g. "
                       "tcp://127.0.0.1:5557; repeat it (NAME=URL) to watch a fleet")
    where.add_argument("--listen", action="append", metavar="tcp://ADDRESS:PORT",
                       help="bind here and wait for the engine to connect (vLLM given a specific address, e.g. "
                       "endpoint tcp://127.0.0.1:5800, connects); repeat it (NAME=URL) for a fleet")
    p.add_argument("--replay-endpoint", default=None, action="append",
                   help="its replay (ROUTER) endpoint, e.g. tcp://127.0.0.1:5558; in a fleet NAME=URL")
    p.add_argument("--load", action="append", default=None,
                   help="fleet: NAME=BLOCKS, a replica's decode load for the overlap-cost (Dynamo-style) scorer")
    p.add_argument("--topic", default="", help="topic prefix to subscribe to (vLLM's default is empty)")
    p.add_argument("--dp-size", type=int, default=1,
                   help=f"data-parallel ranks to follow, 1..{MAX_DP_SIZE} (rank N publishes on port + N)")
    stop = p.add_mutually_exclusive_group()
    stop.add_argument("--batches", type=int, default=None, help="stop after N distinct batches (live and replayed)")
    stop.add_argument("--seconds", type=float, default=None, help=f"stop after S seconds (default {DEFAULT_SECONDS:g})")
    p.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT,
                   help=f"with --batches: give up after this many seconds (default {DEFAULT_TIMEOUT:g})")
    p.add_argument("--block-size", type=int, default=None,
                   help="tokens per block for the prompt (default: the engine's, from its events, else 16)")
    p.add_argument("--hash", default=DEFAULT_HASH, help=f"the engine's hash: {', '.join(HASH_FUNCTIONS)}")
    p.add_argument("--seed", default=DEFAULT_SEED, help="the engine's PYTHONHASHSEED; unset = vLLM's rule (sha256: fixed seed, xxhash: random)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--prompt-tokens", default=None, help="prompt token ids, e.g. 1,2,3")
    src.add_argument("--prompt", default=None, help="prompt text (embedded tokenizer, or --tokenize-url)")
    p.add_argument("--tokenize-url", default=None, help="the engine's /tokenize URL, e.g. http://127.0.0.1:8000/tokenize")
    p.add_argument("--tokenizer", default=None,
                   help="with --prompt: the engines' tokenizer, a Hugging Face id or folder (default: the embedded one)")
    add_request_key_options(p)
    add_json_flag(p)
    p.set_defaults(handler=run)


def _check_args(args: argparse.Namespace) -> tuple[LiveConfig, float, int | None]:
    try:
        if len(args.replay_endpoint or []) > 1:
            raise ValueError("one engine has one replay endpoint")
        config = LiveConfig(args.endpoint[0], (args.replay_endpoint or [None])[0], args.topic, args.dp_size,
                            listen=args.listen is not None).validated()
        if args.block_size is not None:
            limits.block_size(args.block_size)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    seconds, batches = _stop_args(args)
    return config, seconds, batches


def _stop_args(args: argparse.Namespace) -> tuple[float, int | None]:
    """(seconds to wait, batches to wait for or None), checked."""
    try:
        get_hash_fn(args.hash)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if args.batches is not None:
        if not 1 <= args.batches <= MAX_BATCHES:
            raise CliError(f"--batches must be in 1..{MAX_BATCHES:,}, got {args.batches}")
        if not 0 < args.timeout <= MAX_SECONDS:
            raise CliError(f"--timeout must be in (0, {MAX_SECONDS:g}] seconds, got {args.timeout:g}")
        return args.timeout, args.batches
    seconds = DEFAULT_SECONDS if args.seconds is None else args.seconds
    if not 0 < seconds <= MAX_SECONDS:  # also refuses nan
        raise CliError(f"--seconds must be in (0, {MAX_SECONDS:g}], got {seconds:g}")
    return seconds, None


def _prompt_tokens(args: argparse.Namespace) -> list[int] | None:
    if args.prompt_tokens is not None:
        return parse_token_list(args.prompt_tokens, "--prompt-tokens")
    if args.prompt is None:
        return None
    if args.tokenize_url:
        try:
            return tokenize_remote(args.tokenize_url, args.prompt)
        except EngineHTTPError as exc:
            raise CliError(f"--tokenize-url: {exc}") from None
    return tokens_from_text(args.prompt, "--prompt", args.tokenizer)[0]


def run(args: argparse.Namespace) -> dict[str, Any]:
    if args.listen is not None:  # the same addresses, bound here instead of connected to
        args.endpoint = args.listen
    if is_fleet(args):
        seconds, batches = _stop_args(args)
        keys = check_request_keys(args)
        try:
            if args.block_size is not None:
                limits.block_size(args.block_size)
        except ValueError as exc:
            raise CliError(str(exc)) from None
        return run_fleet(args, seconds, batches, _prompt_tokens(args), keys)
    if args.load:
        raise CliError("--load is for a fleet (several --endpoint NAME=URL)")
    config, seconds, batches = _check_args(args)
    keys = check_request_keys(args)
    tokens = _prompt_tokens(args)  # before subscribing: a bad prompt fails fast
    try:
        sub = Subscriber(config, max_batches=batches).start()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        sub.wait(seconds)
    finally:
        sub.stop()
    out = sub.summary()
    if tokens is not None:
        status = check_prompt(sub, tokens, args.block_size, args.hash, args.seed, **keys)
        out["reference"] = REFERENCE_RELEASE
        out["prompt_blocks"] = status.blocks
        out["prompt_cached_blocks"] = status.cached_run
        out["prompt_block_status"] = [
            {"index": i, "hash": hash_label(h, 16), "cached": c}
            for i, (h, c) in enumerate(zip(status.hashes, status.cached, strict=True))
        ]
    return out
