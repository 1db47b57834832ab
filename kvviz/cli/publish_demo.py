"""``python -m kvviz publish-demo``: a demo engine publishing vLLM's KV-cache events (no GPU needed).

kvviz's block manager under a seeded multi-user chat workload; the same wire format and replay socket
as vLLM, so ``watch`` and the "Live engine" page work against it as against a real engine.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from kvviz.cli import CliError, add_json_flag
from kvviz.fleet.demo import DemoPublisher, synthetic_tokenizer
from kvviz.fleet.subscriber import check_bind_endpoint
from kvviz.fleet.wire import FORM_ARRAY, FORM_VLLM, FORMS, REPLAY_LEGACY, REPLAY_V033, offset_endpoint_port

MAX_SECONDS = 7 * 24 * 3600.0
MAX_DEMO_REPLICAS = 8
DEMO_MODEL = "SmolLM2-135M-Instruct"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "publish-demo",
        help="publish a demo engine's KV-cache events (vLLM's wire format) for watch and the Live page",
        description="Drive kvviz's own block pool with a generated multi-user chat workload and publish "
        "its cache events exactly as vLLM does (PUB socket + replay ROUTER socket). Runs until Ctrl-C "
        "or --seconds, then prints what it published.",
    )
    p.add_argument("--endpoint", default="tcp://127.0.0.1:5557", help="PUB address to bind (default %(default)s)")
    p.add_argument("--replay-endpoint", default=None, help="replay ROUTER address to bind (default: port + 1)")
    p.add_argument("--topic", default="", help="topic frame (default empty, as vLLM)")
    p.add_argument("--seed", type=int, default=0, help="workload seed: same seed, same requests and hashes")
    p.add_argument("--interval", type=float, default=0.2, help="seconds between scheduler steps (default 0.2)")
    p.add_argument("--seconds", type=float, default=None, help="stop after S seconds (default: run until Ctrl-C)")
    p.add_argument("--max-batches", type=int, default=None,
                   help="stop stepping after N batches and keep serving replay (for reproducible runs)")
    p.add_argument("--form", choices=FORMS, default=FORM_VLLM,
                   help="payload form: vllm (0.33.0: batch array, tagged-map events), map, array (default %(default)s)")
    p.add_argument("--array-like", action="store_true", help="same as --form array (older vLLM, other engines)")
    p.add_argument("--replay-layout", choices=(REPLAY_V033, REPLAY_LEGACY), default=REPLAY_V033,
                   help="replay reply frames: 0.33 = [topic, seq, payload], legacy = [seq, payload] (default %(default)s)")
    p.add_argument("--int-hashes", action="store_true", help="64-bit int hashes (VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES)")
    p.add_argument("--replicas", type=int, default=1,
                   help=f"a fleet of N demo engines (1..{MAX_DEMO_REPLICAS}): replica i publishes on the endpoint's port "
                   "+ 2i and replays on port + 2i + 1, topic kv@demo-i@MODEL (llm-d's convention)")
    p.add_argument("--synthetic", action="store_true",
                   help="synthetic token ids instead of the embedded tokenizer (starts faster; no text)")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _tokenizer(synthetic: bool, seed: int) -> Any:
    if synthetic:
        return synthetic_tokenizer(seed)
    try:
        from kvviz.model import tokenize  # the embedded model's tokenizer (imports torch)
    except ImportError as exc:
        raise CliError(f"the embedded tokenizer is unavailable ({exc}); use --synthetic") from None
    return lambda text: list(tokenize(text).ids)


def run(args: argparse.Namespace) -> dict[str, Any]:
    try:
        endpoint = check_bind_endpoint(args.endpoint, "--endpoint")
        replay = check_bind_endpoint(args.replay_endpoint or offset_endpoint_port(endpoint, 1), "--replay-endpoint")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if not 0.001 <= args.interval <= 60:
        raise CliError(f"--interval must be in 0.001..60 seconds, got {args.interval:g}")
    if args.seconds is not None and not 0 < args.seconds <= MAX_SECONDS:
        raise CliError(f"--seconds must be in (0, {MAX_SECONDS:g}], got {args.seconds:g}")
    if args.max_batches is not None and not 1 <= args.max_batches <= 10_000_000:
        raise CliError(f"--max-batches must be in 1..10,000,000, got {args.max_batches}")
    if not 1 <= args.replicas <= MAX_DEMO_REPLICAS:
        raise CliError(f"--replicas must be in 1..{MAX_DEMO_REPLICAS}, got {args.replicas}")
    if args.replicas > 1 and args.replay_endpoint:
        raise CliError("--replicas places each replay endpoint itself (port + 2i + 1): drop --replay-endpoint")
    try:
        check_bind_endpoint(offset_endpoint_port(endpoint, 2 * args.replicas - 1), "--endpoint")
    except ValueError as exc:
        raise CliError(f"--endpoint: no room for {args.replicas} replicas above its port ({exc})") from None
    tokenize = _tokenizer(args.synthetic, args.seed)
    demos: list[DemoPublisher] = []
    try:  # Ctrl-C at any point from the first start() on stops every publisher and reports
        try:
            for i in range(args.replicas):
                fleet = args.replicas > 1
                pub = offset_endpoint_port(endpoint, 2 * i) if fleet else endpoint
                rep = offset_endpoint_port(endpoint, 2 * i + 1) if fleet else replay
                topic = args.topic or (f"kv@demo-{i}@{DEMO_MODEL}" if fleet else "")
                demos.append(DemoPublisher(pub, rep, topic=topic, seed=args.seed + i, interval_s=args.interval,
                                           form=FORM_ARRAY if args.array_like else args.form,
                                           replay_layout=args.replay_layout, int_hashes=args.int_hashes,
                                           tokenize=tokenize, max_batches=args.max_batches))
                demos[-1].start()
        except ValueError as exc:
            raise CliError(str(exc)) from None
        if not args.json:
            for demo in demos:
                print(f"publishing on {demo.endpoint} (replay {demo.replay_endpoint}); Ctrl-C to stop", flush=True)
        deadline = None if args.seconds is None else time.monotonic() + args.seconds
        while all(d.alive for d in demos) and (deadline is None or time.monotonic() < deadline):
            time.sleep(0.1)
    except KeyboardInterrupt:
        pass  # Ctrl-C is how a run without --seconds ends: stop and report, as at the deadline
    finally:
        for demo in demos:
            demo.stop()
    for demo in demos:
        if demo.error:
            raise CliError(f"demo publisher stopped: {demo.error}")
    reports = [_report(d) for d in demos]
    return reports[0] if len(reports) == 1 else {"replicas": reports}


def _report(demo: DemoPublisher) -> dict[str, Any]:
    m = demo.workload.manager
    return {"endpoint": demo.endpoint, "replay_endpoint": demo.replay_endpoint,
            "topic": demo.topic.decode(), "batches": demo.seq,
            "cached_blocks": len(m.block_pool.cached_block_hash_to_block), "requests": m.counters.requests,
            "evictions": m.counters.evictions}
