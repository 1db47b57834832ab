"""``python -m kvviz watch`` over several engines: one subscriber per replica (``kvviz.fleet.fleet``), the
cluster index, and with a prompt where llm-d's longest-prefix scorer, Dynamo's overlap-cost scorer and
round-robin would send it. Same fleet, scorers and numbers as the Live engine page's fleet view."""

from __future__ import annotations

import argparse
import re
from typing import Any

from kvviz.cli import CliError
from kvviz.fleet.fleet import Fleet, parse_replicas
from kvviz.mirror.hashing import REFERENCE_RELEASE, get_hash_fn, hash_block_chain, init_none_hash
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE

MAX_LOAD_BLOCKS = 10_000_000


def is_fleet(args: argparse.Namespace) -> bool:
    """Fleet mode: more than one endpoint, or a named one (``NAME=URL``)."""
    eps = args.endpoint or []
    return len(eps) > 1 or any("=" in e for e in eps) or len(args.replay_endpoint or []) > 1


def parse_loads(specs: list[str] | None, names: list[str]) -> dict[str, int]:
    """``NAME=BLOCKS`` decode loads for the overlap-cost scorer; CliError naming the bad one."""
    loads: dict[str, int] = {}
    for spec in specs or []:
        name, _, value = spec.partition("=")
        if name not in names:
            raise CliError(f"--load {spec[:60]!r}: no replica named {name[:40]!r} (replicas: {', '.join(names)})")
        if not re.fullmatch(r"\d{1,8}", value.strip()) or int(value) > MAX_LOAD_BLOCKS:
            raise CliError(f"--load {spec[:60]!r}: the load is a whole number of blocks, 0..{MAX_LOAD_BLOCKS:,}")
        loads[name] = int(value)
    return loads


def run_fleet(args: argparse.Namespace, seconds: float, batches: int | None, tokens: list[int] | None,
              keys: dict[str, str | None]) -> dict[str, Any]:
    try:
        specs = parse_replicas(args.endpoint, args.replay_endpoint or [], args.dp_size, args.topic,
                               listen=args.listen is not None)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    names = [s.name for s in specs]
    loads = parse_loads(args.load, names)
    try:
        fleet = Fleet(specs, max_batches=batches).start()
    except ValueError as exc:
        raise CliError(str(exc)) from None
    try:
        fleet.wait(seconds)
        return fleet_report(fleet, tokens, args.block_size, args.hash, args.seed, keys, loads)
    finally:
        fleet.stop()


def fleet_report(fleet: Fleet, tokens: list[int] | None, block_size: int | None, hash_name: str,
                 seed: str | None, keys: dict[str, str | None], loads: dict[str, int]) -> dict[str, Any]:
    """The ``watch --json`` object of a fleet: ``replicas``, the ``cluster`` totals and, with a prompt,
    ``route`` (each scorer's pick) and each replica's ``prefix_blocks`` and scores."""
    healths = fleet.healths()
    index = fleet.cluster_index()
    replicas = [{
        "name": h.name, "endpoint": h.endpoint, "connected": h.connected, "stale": h.stale,
        "blocks_held": h.blocks_held, "distinct_prefixes": h.distinct_prefixes,
        "churn_per_s": round(h.churn_per_s, 3), "batches": h.batches, "last_seq": h.last_seq,
        "gaps_filled": h.gaps_filled, "missed": h.missed, "decode_errors": h.decode_errors,
        "restarts": h.restarts, "overflow": h.overflow, "pod": h.pod, "model": h.model,
        "blocks_by_medium": h.blocks_by_medium,
    } for h in healths]
    out: dict[str, Any] = {
        "replicas": replicas,
        "cluster": {"distinct_blocks": len(index), "shared_blocks": sum(1 for v in index.values() if len(v) > 1)},
    }
    if tokens is None:
        return out
    size = block_size or fleet.block_size() or DEFAULT_BLOCK_SIZE
    fn = get_hash_fn(hash_name)
    digests = hash_block_chain(tokens, size, fn, init_none_hash(fn, seed), keys["cache_salt"], keys["lora_name"],
                               lora_path=keys["lora_path"])
    views, result = fleet.route(digests, len(tokens), size, loads)
    for row, view, score in zip(replicas, views, result.scores, strict=True):
        row["prefix_blocks"] = view.prefix_blocks
        row["load_blocks"] = view.load_blocks
        row["scores"] = {"longest_prefix": round(score.longest_prefix, 4), "overlap_cost": round(score.overlap_cost, 4)}
    out.update({"reference": REFERENCE_RELEASE, "block_size": size, "prompt_tokens": len(tokens),
                "prompt_blocks": len(digests), "route": result.picks})
    return out
