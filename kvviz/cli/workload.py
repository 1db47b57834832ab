"""``python -m kvviz workload``: the prefix-cache hit rate a request trace gets at every LRU capacity.

The same functions the "Your traffic" page calls (kvviz.analysis.workload.load, kvviz.analysis.workload.reuse_distance,
kvviz.analysis.workload.report). One pass gives the exact curve; see kvviz.analysis.workload.reuse_distance.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from kvviz.analysis.sizes import kv_formula, kvsize
from kvviz.analysis.sizes.hf_config import load_config_file
from kvviz.analysis.sizes.kv_capacity import budget_blocks, gib_bytes
from kvviz.analysis.sizes.kvsize import KVSizeError
from kvviz.analysis.sizes.presets import get_preset
from kvviz.analysis.workload.load import lazy_encoder
from kvviz.analysis.workload.report import parse_capacities, report
from kvviz.analysis.workload.reuse_distance import analyze
from kvviz.analysis.workload.routing import MAX_REPLICAS, POLICIES, routing_report
from kvviz.analysis.workload.sample import analyze_sampled, rate_for_memory
from kvviz.analysis.workload.sample_report import sampled_report
from kvviz.analysis.workload.stream import BadLines, Progress, estimated_accesses, read_trace, sample_trace
from kvviz.analysis.workload.tiers import MAX_GRID_POINTS, parse_host_blocks, two_tier_report
from kvviz.analysis.workload.trace import WorkloadError
from kvviz.cli import CliError, add_json_flag
from kvviz.config_words import size_error
from kvviz.util.units import format_bytes

MAX_TTL_SECONDS = 10**9


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "workload",
        help="hit rate of a request trace at every LRU cache capacity (one pass, exact)",
        description="Read a JSON Lines trace (Mooncake hash_ids lines, token_ids, prompt or OpenAI "
        "messages lines, one request a line, in arrival order) and report the prefix-cache hit rate an LRU "
        "cache of each capacity would get, the infinite-cache maximum, and optionally a TTL policy.",
    )
    p.add_argument("--trace", required=True, metavar="FILE_OR_DIR",
                   help="the trace: JSONL (also .gz, .zst), Parquet or Arrow, or a directory of them (name order)")
    p.add_argument("--block-size", type=int, help="tokens per block (default 512 for hash_ids, 16 otherwise)")
    p.add_argument("--capacities", help="capacities in blocks, e.g. 1000,10000 (default: a log-spaced grid)")
    p.add_argument("--ttl-seconds", type=float, help="also report a TTL policy (needs timestamps)")
    p.add_argument("--preset", help="model preset: adds capacity_bytes (see `bytes --list-presets`)")
    p.add_argument("--config", metavar="FILE", help="a Hugging Face config.json: adds capacity_bytes")
    p.add_argument("--budget-gib", type=float, metavar="G",
                   help="with a model: the blocks G GiB of KV hold, the null block left out (as `bytes --budget-gib`)")
    p.add_argument("--dtype", help=f"KV dtype for bytes: {', '.join(kvsize.DTYPES)} (default fp16)")
    p.add_argument("--sample-rate", type=float, metavar="R",
                   help="sampled mode: keep blocks whose id hashes under R (0 < R <= 1), SHARDS-style")
    p.add_argument("--memory-mb", type=float, metavar="M",
                   help="sampled mode: the rate whose sampled pass fits M MiB (exact when it all fits)")
    p.add_argument("--replicas", metavar="N[,N...]",
                   help="also replay over N replicas (each an LRU cache of each --capacities size, or a default "
                   "grid) under each --routing policy: a 'routing' section")
    p.add_argument("--routing", metavar="POLICIES", default=",".join(POLICIES),
                   help=f"routing policies for --replicas (default all: {','.join(POLICIES)})")
    p.add_argument("--host-blocks", metavar="H[,H...]",
                   help="also a host (CPU) tier of H blocks under the device pool, vLLM 0.33.0's native KV "
                   "offloading: hit rates by source over --capacities (or a grid) x H, and with a model the "
                   "bytes a second it loads and stores: a 'two_tier' section (0 = no host tier)")
    p.add_argument("--kv-offloading-eviction-policy", choices=("lru", "arc"), default="lru",
                   help="how the --host-blocks tier evicts: lru (the default) or arc (adaptive replacement), as "
                   "vLLM 0.33.0's offloading eviction_policy")
    p.add_argument("--strict", action="store_true",
                   help="stop at the first bad line (by default bad lines are counted, skipped and reported)")
    p.add_argument("--skip-bad-lines", action="store_true", help=argparse.SUPPRESS)  # the default now
    p.add_argument("--engine", metavar="dask",
                   help="analyse a directory of shards on a Dask cluster (sampled: --sample-rate, default 1; "
                   "see docs/WORKLOAD.md)")
    p.add_argument("--address", metavar="SCHEDULER",
                   help="the Dask scheduler for --engine, e.g. tcp://10.0.0.5:8786 (default: a local "
                   "two-worker cluster on 127.0.0.1)")
    p.add_argument("--progress", action="store_true",
                   help="progress (read, rate, ETA) on stderr even when stderr is not a terminal")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _progress_printer(force: bool) -> tuple[Callable[[Progress], None] | None, Callable[[], None]]:
    """A progress callback writing one updating line to stderr (a TTY, or ``force``), and its closer."""
    if not (force or sys.stderr.isatty()):
        return None, lambda: None
    shown = [False]

    def show(p: Progress) -> None:
        amount = (lambda v: format_bytes(v)) if p.unit == "bytes" else (lambda v: f"{v:,} rows")
        pct = f" ({p.done / p.total:.0%})" if p.total else ""
        eta = f", ETA {p.eta_s:,.0f} s" if p.eta_s is not None else ""
        rate = f"{format_bytes(p.rate)}/s" if p.unit == "bytes" else f"{p.rate:,.0f} rows/s"
        end = "\r" if sys.stderr.isatty() else "\n"
        sys.stderr.write(f"read {amount(p.done)} of {amount(p.total)}{pct}, {p.requests:,} requests, "
                         f"{rate}{eta}   {end}")
        sys.stderr.flush()
        shown[0] = True

    def close() -> None:
        if shown[0] and sys.stderr.isatty():
            sys.stderr.write("\n")

    return show, close


def _bytes_per_token(args: argparse.Namespace) -> Fraction | None:
    if args.preset is not None and args.config is not None:
        raise CliError("give one model, not --preset and --config")
    if args.preset is None and args.config is None:
        if args.dtype is not None:
            raise CliError("--dtype needs a model: --preset NAME or --config FILE")
        return None
    try:
        shape = get_preset(args.preset).shape() if args.preset is not None else load_config_file(args.config).shape
        return kv_formula.bytes_per_token(shape, args.dtype or "fp16")
    except KVSizeError as exc:
        raise CliError(size_error(exc)) from None


def run(args: argparse.Namespace) -> dict[str, Any]:
    capacities = None
    if args.capacities is not None:
        try:
            capacities = parse_capacities(args.capacities)
        except ValueError as exc:
            raise CliError(f"--capacities: {exc}") from None
    ttl = args.ttl_seconds
    if ttl is not None and (not math.isfinite(ttl) or not 0 < ttl <= MAX_TTL_SECONDS):
        raise CliError(f"--ttl-seconds must be a positive number of seconds (at most {MAX_TTL_SECONDS:,})")
    bpt = _bytes_per_token(args)
    if args.budget_gib is not None and bpt is None:
        raise CliError("--budget-gib needs a model: --preset NAME or --config FILE")
    if args.budget_gib is not None and not (math.isfinite(args.budget_gib) and 0 < args.budget_gib <= 1 << 30):
        raise CliError(f"--budget-gib must be a positive number of GiB (at most {1 << 30:,})")
    _check_sampling(args, ttl)
    replicas, policies = _routing_args(args)
    hosts = _host_args(args)
    if hosts and capacities is not None and len(capacities) > MAX_GRID_POINTS:
        raise CliError(f"--host-blocks takes at most {MAX_GRID_POINTS} --capacities")
    if args.engine is not None or args.address is not None:
        return _run_sharded(args, capacities, bpt, ttl, replicas)
    show, close = _progress_printer(args.progress)
    try:
        rate = args.sample_rate
        if args.memory_mb is not None:  # before reading: the accesses bound the distinct blocks
            rate = rate_for_memory(args.memory_mb, estimated_accesses(args.trace))
        if rate is not None and rate < 1.0 and not replicas and not hosts:  # streamed: only the kept accesses are held
            profile, bad = sample_trace(args.trace, rate, args.block_size, lazy_encoder(), not args.strict, show)
            close()
            out = sampled_report(profile, capacities, bpt)
            if args.budget_gib is not None:
                out["budget"] = budget_blocks(bpt, gib_bytes(args.budget_gib), profile.block_size).to_dict()
            return _with_bad_lines(out, args, bad)
        cols, bad = read_trace(args.trace, args.block_size, lazy_encoder(), not args.strict, show)
        close()
        if ttl is not None and not cols.has_timestamps:
            missing = int(np.flatnonzero(np.isnan(cols.timestamps))[0])
            raise WorkloadError(f"--ttl-seconds needs a timestamp on every line (request {missing + 1} has none)",
                                "ttl_needs_timestamps", request=missing + 1)
        if rate is not None and rate < 1.0:
            out = sampled_report(analyze_sampled(cols, rate), capacities, bpt)
        else:
            out = report(cols, analyze(cols, ttl), capacities, bpt)
            if rate is not None:
                out.update(sampled=False, sample_rate=1.0, hit_rate_error=0.0)
        if replicas:
            out["routing"] = routing_report(cols, replicas, policies, capacities)
        if hosts:
            per_block = float(bpt * cols.block_size) if bpt is not None else None
            out["two_tier"] = two_tier_report(cols, hosts, capacities, per_block, args.kv_offloading_eviction_policy)
        if args.budget_gib is not None:  # the workload page's "budget" mark: the same blocks
            out["budget"] = budget_blocks(bpt, gib_bytes(args.budget_gib), cols.block_size).to_dict()
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    except OSError as exc:
        raise CliError(f"cannot read {args.trace}: {exc.strerror or type(exc).__name__}") from None
    except WorkloadError as exc:
        close()
        raise CliError(f"{args.trace}: {exc}") from None
    return _with_bad_lines(out, args, bad)


def _run_sharded(args: argparse.Namespace, capacities: list[int] | None, bpt: Fraction | None,
                 ttl: float | None, replicas: list[int]) -> dict[str, Any]:
    """``--engine dask``: the trace's files on a Dask cluster (kvviz.analysis.workload.sharded)."""
    if args.engine is None:
        raise CliError("--address needs --engine dask")
    if args.engine == "ray":
        raise CliError("--engine ray is not supported: kvviz runs sharded analysis on Dask (--engine dask)")
    if args.engine != "dask":
        raise CliError(f"--engine: unknown engine {args.engine!r} (dask)")
    if ttl is not None or replicas or args.memory_mb is not None:
        raise CliError("--engine dask takes --sample-rate only: drop --ttl-seconds, --replicas and --memory-mb")
    try:
        from kvviz.analysis.workload.sharded import analyze_sharded

        res = analyze_sharded(args.trace, args.sample_rate or 1.0, args.address, args.block_size,
                              not args.strict, tokenize=True)
    except FileNotFoundError as exc:
        raise CliError(str(exc)) from None
    except WorkloadError as exc:
        raise CliError(f"{args.trace}: {exc}") from None
    except (OSError, TimeoutError) as exc:
        detail = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
        raise CliError(f"--engine dask: cannot reach the cluster at {args.address or 'a local cluster'} "
                       f"({detail})") from None
    out = sampled_report(res.profile, capacities, bpt)
    out.update(engine="dask", workers=res.workers, files=res.files, partitions=len(res.profile.groups))
    return _with_bad_lines(out, args, res.bad)


def _routing_args(args: argparse.Namespace) -> tuple[list[int], list[str]]:
    if args.replicas is None:
        return [], []
    parts = [p.strip() for p in args.replicas.split(",") if p.strip()]
    if not parts or not all(p.isdigit() and 1 <= int(p) <= MAX_REPLICAS for p in parts):
        raise CliError(f"--replicas: give replica counts in 1..{MAX_REPLICAS}, e.g. 1,2,4")
    policies = [p.strip() for p in args.routing.split(",") if p.strip()]
    unknown = [p for p in policies if p not in POLICIES]
    if not policies or unknown:
        raise CliError(f"--routing: unknown policy {unknown[0] if unknown else ''!r} (one of {', '.join(POLICIES)})")
    return sorted({int(p) for p in parts}), list(dict.fromkeys(policies))


def _host_args(args: argparse.Namespace) -> list[int]:
    if args.host_blocks is None:
        return []
    try:
        hosts = parse_host_blocks(args.host_blocks)
    except ValueError as exc:
        raise CliError(f"--host-blocks: {exc}") from None
    if args.sample_rate is not None or args.memory_mb is not None or args.engine is not None:
        raise CliError("--host-blocks replays the whole trace: drop --sample-rate, --memory-mb and --engine")
    return hosts


def _check_sampling(args: argparse.Namespace, ttl: float | None) -> None:
    if args.sample_rate is not None and args.memory_mb is not None:
        raise CliError("give --sample-rate or --memory-mb, not both")
    if args.sample_rate is not None and not (math.isfinite(args.sample_rate) and 0 < args.sample_rate <= 1):
        raise CliError("--sample-rate must be a number in (0, 1]")
    if args.memory_mb is not None and not (math.isfinite(args.memory_mb) and 0 < args.memory_mb <= 2**30):
        raise CliError("--memory-mb must be a positive number of MiB")
    if ttl is not None and (args.sample_rate is not None or args.memory_mb is not None):
        raise CliError("sampled mode has no TTL: drop --ttl-seconds or the sampling flag")


def _with_bad_lines(out: dict[str, Any], args: argparse.Namespace, bad: BadLines) -> dict[str, Any]:
    """Bad lines are counted by default: ``bad_lines`` in the JSON, one line on stderr when there were any
    (``--strict`` stops at the first instead, so there are none)."""
    out["bad_lines"] = bad.as_dict()
    if bad.count:
        first = "; ".join(e if Path(f) == Path(args.trace) else f"{f}: {e}" for f, _, e in bad.first[:3])
        sys.stderr.write(f"skipped {bad.count:,} bad lines (--strict stops at the first); the first: {first}\n")
    return out
