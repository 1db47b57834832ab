"""``python -m kvviz room``: prompts from several sessions through one shared room, as the room page sends
them (same Room, same salts); with --prefill every prompt also runs on the real model."""

from __future__ import annotations

import argparse
from typing import Any

from kvviz.cli import CliError, add_json_flag, check_model_option
from kvviz.room.session import SALT_MODES


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
        "use). --salt SESSION:MODE[:TEAM] sets a session's salt first (off, private, team). Prints, per "
        "prompt, the tokens reused from other sessions, each block's anonymised origin and how many of its "
        "blocks the pool holds without and with a salt, then the room's totals and whether its invariants hold.",
    )
    p.add_argument("--prompt", action="append", default=[], metavar="SESSION:TEXT", help="a prompt (repeatable)")
    p.add_argument("--salt", action="append", default=[], metavar="SESSION:MODE[:TEAM]", help="a session's salt")
    p.add_argument("--prefill", action="store_true", help="also prefill every prompt on the real model (measured)")
    p.add_argument("--blocks", type=int, default=1024, help="pool size in blocks (default 1024)")
    p.add_argument("--model", default=None, help="'embedded' (default), a Hugging Face id, or a local folder")
    add_json_flag(p)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> dict[str, Any]:
    check_model_option(args.model)
    if not args.prompt:
        raise CliError("give at least one --prompt SESSION:TEXT")
    if not 1 <= args.blocks <= 65536:
        raise CliError(f"--blocks must be between 1 and 65536, got {args.blocks}")
    prompts = [_pair(v, "--prompt") for v in args.prompt]
    salts = [_pair(v, "--salt") for v in args.salt]
    from kvviz.model import InputError, ModelLoadError, tokenize
    from kvviz.room.limits import RoomLimits
    from kvviz.room.room import Room
    from kvviz.room.session import salt_for_view

    room = Room(RoomLimits(num_blocks=args.blocks, burst=10_000, room_burst=100_000))
    sessions: dict[str, str] = {}

    def sid(name: str) -> str:
        if name not in sessions:
            sessions[name] = room.join()
        return sessions[name]

    for name, spec in salts:
        mode, _, team = spec.partition(":")
        if mode not in SALT_MODES:
            raise CliError(f"unknown salt mode {mode!r} for {name}; use one of {', '.join(SALT_MODES)}")
        try:
            room.set_salt(sid(name), mode, team)
        except ValueError as exc:
            raise CliError(str(exc)) from exc
    lm = None
    if args.prefill:
        from kvviz.model import load_model

        try:
            lm = load_model(args.model)
        except ModelLoadError as exc:
            raise CliError(str(exc).strip().splitlines()[0]) from exc
    rows = []
    for name, text in prompts:
        try:
            if lm is not None:
                from kvviz.room.prefill import room_prefill

                out = room_prefill(lm, room, sid(name), text=text)
                adm, latency = out.admission, out.latency_ms
            else:
                clipped, _ = room.clip_text(text)
                tok = tokenize(clipped, model_name=args.model, max_tokens=room.limits.max_prompt_tokens)
                adm = room.submit(sid(name), tok.ids, num_tokens_before_truncation=tok.num_tokens_before_truncation)
                latency = None
        except (InputError, ValueError) as exc:
            raise CliError(f"prompt of {name}: {str(exc).strip().splitlines()[0]}") from exc
        if not adm.ok:
            raise CliError(f"prompt of {name} refused: {adm.error}")
        bs = room.limits.block_size
        row: dict[str, Any] = {
            "session": name, "num_tokens": adm.num_tokens, "hit_tokens": adm.hit_tokens,
            "from_others_tokens": adm.blocks_from_others * bs, "computed_tokens": adm.computed_tokens,
            "salted": adm.cache_salt is not None, "truncated": adm.truncated,
            "blocks": [b.status if b.status != "hit" else f"hit:{b.computed_by}" for b in adm.blocks],
        }
        if latency is not None:
            row["prefill_ms"] = latency
        salt, illustrative = salt_for_view(sid(name), adm.cache_salt)
        row["salt_view"] = {  # the page's "why the salt isolates": full blocks in the pool, without / with a salt
            "salt": "illustrative" if illustrative else "own",
            "cached_blocks_without_salt": sum(room.is_cached(r.hash) for r in room.block_records(adm.token_ids) if r.full),
            "cached_blocks_with_salt": sum(room.is_cached(r.hash) for r in room.block_records(adm.token_ids, salt) if r.full),
        }
        rows.append(row)
    try:
        room.check_invariants()
        ok = True
    except AssertionError:
        ok = False
    totals = room.totals().as_dict()
    for key in ("since_s", "median_prefill_hit_ms", "median_prefill_miss_ms", "prefills_hit", "prefills_miss"):
        if lm is None:
            totals.pop(key)
    return {"prompts": rows, "totals": totals, "invariants_ok": ok}
