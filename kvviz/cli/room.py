"""``python -m kvviz room``: prompts from several sessions through one shared room on the engine, as the
room page sends them (same Room, same salts, same rows): cached tokens are the engine's own count."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from kvviz.cli import CliError, add_json_flag, check_model_option
from kvviz.experiments.room.session import SALT_MODES

if TYPE_CHECKING:  # types only: the room imports the engine (torch) when the command runs
    from kvviz.experiments.room.room import Room


def _pair(value: str, what: str) -> tuple[str, str]:
    name, sep, rest = value.partition(":")
    if not sep or not name.strip():
        raise CliError(f"{what} must look like SESSION:{'TEXT' if what == '--prompt' else 'MODE[:TEAM]'}, got {value!r}")
    return name.strip(), rest


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "room",
        help="several sessions sending prompts to one shared block pool, with cache salts",
        description="Each --prompt SESSION:TEXT is sent in order by the named session (sessions join on first "
        "use). --salt SESSION:MODE[:TEAM] sets a session's salt first (off, private, team). Every prompt runs "
        "its prefill on the engine (max_tokens=1). Prints, per prompt, the tokens reused from other sessions, "
        "each block's anonymised origin, the measured prefill and how many of its blocks the pool holds "
        "without and with a salt, then the room's totals and whether its invariants hold.",
    )
    p.add_argument("--prompt", action="append", default=[], metavar="SESSION:TEXT", help="a prompt (repeatable)")
    p.add_argument("--salt", action="append", default=[], metavar="SESSION:MODE[:TEAM]", help="a session's salt")
    p.add_argument("--kv-cache-mib", type=int, default=None, metavar="MIB",
                   help="the engine's K/V memory budget in MiB (default: KVVIZ_KV_CACHE_MIB, 256)")
    p.add_argument("--model", default=None, help="'embedded' (default), a Llama-family folder or hub id")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_model_option(args.model)
    if not args.prompt:
        raise CliError("give at least one --prompt SESSION:TEXT")
    if args.kv_cache_mib is not None and not 1 <= args.kv_cache_mib <= 65536:
        raise CliError(f"--kv-cache-mib must be between 1 and 65536, got {args.kv_cache_mib}")
    prompts = [_pair(v, "--prompt") for v in args.prompt]
    salts = [_pair(v, "--salt") for v in args.salt]
    from kvviz.engine import EngineConfig, EngineLoop, LLMEngine
    from kvviz.errors import CodedError
    from kvviz.experiments.room.limits import RoomLimits
    from kvviz.experiments.room.room import Room
    from kvviz.model import ModelLoadError, load_model

    for name, spec in salts:
        mode = spec.partition(":")[0]
        if mode not in SALT_MODES:
            raise CliError(f"unknown salt mode {mode!r} for {name}; use one of {', '.join(SALT_MODES)}")
    try:
        lm = load_model(args.model)
        config = EngineConfig() if args.kv_cache_mib is None else EngineConfig(kv_cache_bytes=args.kv_cache_mib << 20)
        loop = EngineLoop(LLMEngine(lm, config))
    except ModelLoadError as exc:
        raise CliError(str(exc).strip().splitlines()[0]) from exc
    except (CodedError, ValueError) as exc:  # engine_unsupported_model, a budget below two blocks
        raise CliError(str(exc).strip().splitlines()[0]) from exc
    try:
        room = Room(RoomLimits(burst=10_000, room_burst=100_000), engine=loop)
        return _run_prompts(room, prompts, salts)
    finally:
        loop.close()


def _run_prompts(room: Room, prompts: list[tuple[str, str]], salts: list[tuple[str, str]]) -> dict[str, Any]:
    """Each prompt through ``room`` in order (sessions join on first use), as rows of the JSON."""
    from kvviz.experiments.room.prefill import room_prefill
    from kvviz.experiments.room.rows import last_prompt_view

    sessions: dict[str, str] = {}

    def sid(name: str) -> str:
        if name not in sessions:
            sessions[name] = room.join()
        return sessions[name]

    for name, spec in salts:
        mode, _, team = spec.partition(":")
        try:
            room.set_salt(sid(name), mode, team)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    rows = []
    for name, text in prompts:
        try:
            out = room_prefill(room, sid(name), text=room.clip_text(text)[0])
        except ValueError as exc:  # InputError (empty text) is a ValueError
            raise CliError(f"prompt of {name}: {str(exc).strip().splitlines()[0]}") from exc
        adm = out.admission
        if not adm.ok:
            raise CliError(f"prompt of {name} refused: {adm.error}")
        view = last_prompt_view(room, sid(name))
        rows.append({
            "session": name, "num_tokens": adm.num_tokens, "hit_tokens": adm.hit_tokens,
            "from_others_tokens": view.from_others_tokens, "computed_tokens": adm.computed_tokens,
            "salted": adm.cache_salt is not None, "truncated": adm.truncated,
            "blocks": [b.status if b.status != "hit" else f"hit:{b.computed_by}" for b in adm.blocks],
            "prefill_compute_ms": adm.compute_ms, "prefill_wait_ms": adm.wait_ms, "latency_ms": adm.latency_ms,
            # the page's "why the salt isolates": full blocks in the pool, without / with a salt
            "salt_view": {"salt": "illustrative" if view.illustrative else "own",
                          "cached_blocks_without_salt": sum(view.plain_cached),
                          "cached_blocks_with_salt": sum(view.salted_cached)},
        })
    try:
        room.check_invariants()
        ok = True
    except AssertionError:
        ok = False
    return {"prompts": rows, "totals": room.totals().as_dict(), "invariants_ok": ok}
