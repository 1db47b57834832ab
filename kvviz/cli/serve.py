"""``python -m kvviz serve``: kvviz's engine behind an OpenAI-compatible API (no UI), as ``vllm serve``.

Endpoints, errors and metrics: kvviz.server (docs/SERVER.md). Listens on 127.0.0.1 unless ``--host``
says otherwise; ``--port 0`` picks a free port (the URL is printed on stderr before serving).
"""

from __future__ import annotations

import argparse
import secrets
import sys
from typing import TYPE_CHECKING, Any

from kvviz.cli import (
    CliError,
    add_block_size_flag,
    add_json_flag,
    add_kv_offloading_eviction_flag,
    add_kv_offloading_flag,
    add_reserve_full_isl_flag,
)
from kvviz.server.config import DEFAULT_HOST, DEFAULT_MAX_WAITING, DEFAULT_PORT, ServerConfig
from kvviz.settings import settings

if TYPE_CHECKING:  # types only: no torch or zmq import before a command needs it
    from kvviz.engine import EngineConfig, EngineLoop
    from kvviz.server.kv_publisher import KVEventPublisher

MAX_WAITING_LIMIT = 100_000
HASH_FORMATS = ("int", "bytes")
MAX_KV_MIB = 1 << 20


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "serve", help="serve kvviz's engine over an OpenAI-compatible HTTP API (no UI)",
        description="Load the model into kvviz's engine and serve /v1/completions, /v1/chat/completions, "
        "/v1/models, /health, /metrics (vLLM's metric names) and /reset_prefix_cache, optionally publishing "
        "vLLM's KV-cache events on ZeroMQ.")
    p.add_argument("--host", default=DEFAULT_HOST, help=f"address to listen on (default {DEFAULT_HOST}; "
                   "0.0.0.0 for a LAN workshop)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"TCP port (default {DEFAULT_PORT}; 0: any free)")
    p.add_argument("--api-key", help="require 'Authorization: Bearer KEY' on /v1 (default: KVVIZ_API_KEY, else none)")
    p.add_argument("--max-waiting", type=int, default=DEFAULT_MAX_WAITING, metavar="N",
                   help=f"API requests that may wait for their first token; more get 503 (default {DEFAULT_MAX_WAITING})")
    p.add_argument("--kv-events-endpoint", metavar="tcp://HOST:PORT",
                   help="publish vLLM's KV-cache events on this ZeroMQ PUB address")
    p.add_argument("--kv-events-replay-endpoint", metavar="tcp://HOST:PORT",
                   help="the replay (ROUTER) address (default: the PUB port + 1; 'none' for no replay socket)")
    p.add_argument("--kv-events-topic", default="", help="topic of every KV-event message (default empty)")
    p.add_argument("--kv-events-hash-format", choices=HASH_FORMATS, default="int",
                   help="block hashes in KV events: int, the digest's low 64 bits, as vLLM publishes by default "
                   "(VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1); bytes, the whole 32-byte digest (=0). Default int")
    add_block_size_flag(p)
    p.add_argument("--kv-cache-mib", type=int, metavar="MIB", help="K/V memory budget in MiB (default: the engine's)")
    p.add_argument("--max-model-len", type=int, metavar="N", help="longest prompt + answer in tokens")
    add_reserve_full_isl_flag(p)
    add_kv_offloading_flag(p)
    add_kv_offloading_eviction_flag(p)
    p.add_argument("--log-level", default="warning", choices=("critical", "error", "warning", "info", "debug"))
    add_json_flag(p)
    p.set_defaults(handler=run)


def _check(args: argparse.Namespace) -> tuple[str | None, str | None]:
    if not args.host.strip():
        raise CliError("--host is empty")
    if not 0 <= args.port <= 65535:
        raise CliError(f"--port must be in 0..65535, got {args.port}")
    if not 1 <= args.max_waiting <= MAX_WAITING_LIMIT:
        raise CliError(f"--max-waiting must be in 1..{MAX_WAITING_LIMIT:,}, got {args.max_waiting}")
    if args.kv_cache_mib is not None and not 1 <= args.kv_cache_mib <= MAX_KV_MIB:
        raise CliError(f"--kv-cache-mib must be in 1..{MAX_KV_MIB:,}, got {args.kv_cache_mib}")
    if args.max_model_len is not None and not 2 <= args.max_model_len <= 1 << 20:
        raise CliError(f"--max-model-len must be in 2..{1 << 20:,}, got {args.max_model_len}")
    if args.api_key is not None and not args.api_key.strip():
        raise CliError("--api-key is empty: leave it out for no key")
    if "KVVIZ_STEP_THREADS" in settings().errors:
        raise CliError(settings().errors["KVVIZ_STEP_THREADS"])
    if not args.kv_events_endpoint:
        return None, None
    from kvviz.fleet.subscriber import check_bind_endpoint
    from kvviz.server.kv_publisher import replay_endpoint_for

    try:
        endpoint = check_bind_endpoint(args.kv_events_endpoint, "--kv-events-endpoint")
        replay = replay_endpoint_for(endpoint, args.kv_events_replay_endpoint)
        if replay is not None:
            replay = check_bind_endpoint(replay, "--kv-events-replay-endpoint")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    return endpoint, replay


def kv_event_publisher(args: argparse.Namespace, endpoint: str, replay: str | None) -> KVEventPublisher:
    """The KV-event publisher ``args`` ask for, its sockets bound (ValueError on a busy port)."""
    from kvviz.server.kv_publisher import KVEventPublisher

    return KVEventPublisher(endpoint, replay, topic=args.kv_events_topic,
                            int_hashes=args.kv_events_hash_format == "int")


def engine_config(args: argparse.Namespace) -> EngineConfig:
    """The ``EngineConfig`` the flags ask for (checked ones)."""
    from kvviz.engine import EngineConfig

    kw: dict[str, Any] = {"block_size": int(args.block_size),
                          "scheduler_reserve_full_isl": args.scheduler_reserve_full_isl,
                          "kv_offloading_size": args.kv_offloading_size,
                          "kv_offloading_eviction_policy": args.kv_offloading_eviction_policy}
    if args.kv_cache_mib is not None:
        kw["kv_cache_bytes"] = args.kv_cache_mib << 20
    if args.max_model_len is not None:
        kw["max_model_len"] = args.max_model_len
    return EngineConfig(**kw)


def _engine_loop(args: argparse.Namespace) -> EngineLoop:
    from kvviz.engine import EngineLoop, LLMEngine
    from kvviz.engine.threads import StepThreads, default_policy
    from kvviz.model import load_model

    # stepped in the main thread (``run_here``), where OpenMP's idle threads may spin between the step's regions,
    # on every core for every step
    threads = StepThreads(default_policy(spare_a_core=False))
    return EngineLoop(LLMEngine(load_model(), engine_config(args)), threads, own_thread=False)


def run(args: argparse.Namespace) -> dict[str, Any]:
    endpoint, replay = _check(args)
    from kvviz.server.app import create_app
    from kvviz.server.uvicorn_server import bind, serve_beside, url_of

    env = settings()
    presenter_key = env.presenter_key or secrets.token_urlsafe(9)
    config = ServerConfig(host=args.host.strip(), port=args.port,
                          api_key=(args.api_key or "").strip() or env.api_key,
                          presenter_key=presenter_key, max_waiting=args.max_waiting,
                          kv_events_endpoint=endpoint, kv_events_replay_endpoint=replay,
                          kv_events_topic=args.kv_events_topic)
    try:  # the sockets first: a busy port fails before the model loads
        sock = bind(config.host, config.port)
        publisher = kv_event_publisher(args, endpoint, replay) if endpoint else None
    except ValueError as exc:
        raise CliError(str(exc)) from None
    url = url_of(config.host, sock.getsockname()[1])
    loop = _engine_loop(args)
    app = create_app(lambda: loop, config, publisher=publisher)
    engine = app.state.serving.engine  # the loop exists now: the publisher is subscribed
    events = (f"; KV events on {endpoint}" + (f" (replay {replay})" if replay else "")
              + f", {args.kv_events_hash_format} hashes") if endpoint else ""
    print(f"kvviz serve: listening on {url}/v1 (model {config.model_name}, {engine.num_blocks} blocks of "
          f"{engine.block_size} tokens, max_model_len {engine.max_model_len}){events}", file=sys.stderr)
    if env.presenter_key is None:
        print(f"kvviz serve: presenter key {presenter_key} (POST /reset_prefix_cache with X-Presenter-Key)",
              file=sys.stderr)
    sys.stderr.flush()
    try:
        serve_beside(app, sock, loop.run_here, args.log_level)
    finally:
        loop.close()
    stats = loop.stats()
    return {"url": url, "prefix_cache_queries": stats.prefix_cache_queries,
            "prefix_cache_hits": stats.prefix_cache_hits, "requests_finished": stats.requests_finished_total}
