"""``python -m kvviz bytes``: exact per-token KV-cache bytes for a preset, a config.json or typed numbers.

The same functions the calculator page calls (kvviz.analysis.sizes.kvsize / hf_config / presets), so the page
and the CLI always agree.
"""

from __future__ import annotations

import argparse
import math
import sys
from typing import Any

from kvviz.analysis.sizes import kv_capacity, kv_formula, kvsize
from kvviz.analysis.sizes.hf_config import (
    MAX_CONFIG_BYTES,
    ConfigNote,
    ParsedConfig,
    load_config_file,
    parse_config_text,
)
from kvviz.analysis.sizes.kvsize import KVSizeError, ModelShape
from kvviz.analysis.sizes.presets import PRESETS, get_preset
from kvviz.cli import CliError, add_block_size_flag, add_json_flag
from kvviz.config_words import config_note, size_error
from kvviz.util import units

_TYPED = ("layers", "kv_heads", "head_dim", "heads", "d_model", "window", "kv_lora_rank", "qk_rope_head_dim")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bytes",
        help="exact KV-cache bytes per token (MHA/GQA/MQA/MLA, sliding, hybrid) and capacity",
        description="Per-token KV-cache size: 2 x KV layers x KV heads x head_dim x bytes per value "
        "(MLA: one latent per layer). Give one model: --preset, --config, or typed numbers "
        "(--layers, --kv-heads, --head-dim). Totals are for --tokens per request x --batch requests.",
    )
    src = p.add_argument_group("model (one of)")
    src.add_argument("--preset", help="a preset name (see --list-presets)")
    src.add_argument("--config", metavar="FILE", help="a Hugging Face config.json ('-' reads stdin)")
    src.add_argument("--layers", type=int, help="number of layers (typed numbers)")
    src.add_argument("--kv-heads", type=int, help="KV heads per layer")
    src.add_argument("--head-dim", type=int, help="dimension of one head")
    src.add_argument("--heads", type=int, help="query heads (default: --kv-heads, i.e. MHA)")
    src.add_argument("--d-model", type=int, help="hidden size for the naive formula (default heads x head_dim)")
    src.add_argument("--window", type=int, help="sliding window: every layer keeps at most this many tokens")
    src.add_argument("--kv-lora-rank", type=int, help="MLA latent rank (makes the model MLA)")
    src.add_argument("--qk-rope-head-dim", type=int, help="MLA decoupled RoPE key dimension (default 0)")
    p.add_argument("--list-presets", action="store_true", help="list the presets and their sources")
    p.add_argument("--dtype", default="fp16", help=f"KV dtype: {', '.join(kvsize.DTYPES)} (default fp16)")
    p.add_argument("--tokens", type=int, default=1, help="tokens per request (default 1)")
    p.add_argument("--batch", type=int, default=1, help="concurrent requests (default 1)")
    add_block_size_flag(p)
    p.add_argument("--budget-gib", type=float, help="memory budget in GiB: report max tokens and max requests")
    p.add_argument("--max-len", type=int, help="contiguous reservation per request: compare its waste with paging")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _list_presets() -> dict[str, Any]:
    rows = []
    for preset in PRESETS:
        shape = preset.shape()
        rows.append({
            "key": preset.key,
            "label": preset.label,
            "attention": shape.attention,
            "bytes_per_token_fp16": units.as_number(kv_formula.bytes_per_token(shape, "fp16")),
            "article_bytes_per_token": preset.article_bytes_per_token,
            "source": preset.source,
        })
    return {"presets": rows}


def _typed_given(args: argparse.Namespace) -> list[str]:
    return [name for name in _TYPED if getattr(args, name) is not None]


def _model(args: argparse.Namespace) -> tuple[ModelShape, dict[str, Any]]:
    """The shape the arguments describe, plus provenance fields for the output."""
    typed = _typed_given(args)
    chosen = [flag for flag, on in (("--preset", args.preset is not None), ("--config", args.config is not None),
                                    ("typed numbers", bool(typed))) if on]
    if len(chosen) > 1:
        raise CliError(f"give one model, not {' and '.join(chosen)}: --preset, --config, or typed numbers")
    if not chosen:
        raise CliError("no model: give --preset NAME, --config FILE, or --layers N --kv-heads N --head-dim N")
    if args.preset is not None:
        preset = get_preset(args.preset)
        info: dict[str, Any] = {"preset": preset.key, "source": preset.source}
        if preset.article_bytes_per_token is not None:
            info["article_bytes_per_token"] = preset.article_bytes_per_token
            info["article_note"] = preset.article_note
        shape = preset.shape()
        info.update(_notes(shape.notes))
        return shape, info
    if args.config is not None:
        parsed = _read_config(args.config)
        shape = parsed.shape
        return shape, {
            "source": args.config,
            "model_type": parsed.model_type,
            "family": parsed.family,
            "config_dtype": parsed.config_dtype,
            **_notes(parsed.notes),
        }
    missing = [f"--{n.replace('_', '-')}" for n in ("layers", "kv_heads", "head_dim") if getattr(args, n) is None]
    if missing:
        raise CliError(f"typed numbers need --layers, --kv-heads and --head-dim (missing {', '.join(missing)})")
    if args.qk_rope_head_dim is not None and args.kv_lora_rank is None:
        raise CliError("--qk-rope-head-dim needs --kv-lora-rank (MLA)")
    shape = kvsize.shape_from_counts(
        "typed model", args.layers, args.kv_heads, args.head_dim, heads=args.heads, d_model=args.d_model,
        window=args.window, kv_lora_rank=args.kv_lora_rank, qk_rope_head_dim=args.qk_rope_head_dim,
    )
    return shape, {"source": "typed numbers"}


def _notes(notes: tuple[ConfigNote, ...]) -> dict[str, Any]:
    """The reader's notes in English (``config_notes``) and as codes (``config_note_codes``)."""
    return {"config_notes": [config_note(n) for n in notes], "config_note_codes": [n.to_dict() for n in notes]}


def _read_config(path: str) -> ParsedConfig:
    if path == "-":
        raw = sys.stdin.buffer.read(MAX_CONFIG_BYTES + 1)
        return parse_config_text(raw, "stdin")
    return load_config_file(path)


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Compute the calculator result; KVSizeError (bad input) becomes a one-line CLI error."""
    try:
        if args.list_presets:
            return _list_presets()
        return _run(args)
    except KVSizeError as exc:
        raise CliError(size_error(exc)) from None


def _run(args: argparse.Namespace) -> dict[str, Any]:
    shape, info = _model(args)
    dtype = kvsize.normalize_dtype(args.dtype)
    tokens = kvsize.check_count("--tokens", args.tokens, high=kvsize.MAX_TOKENS)
    batch = kvsize.check_count("--batch", args.batch, high=kvsize.MAX_BATCH)
    block_size = args.block_size  # a BlockSize: checked when the arguments were parsed
    rep = kv_formula.report(shape, dtype, tokens, batch)
    out: dict[str, Any] = rep.to_dict()
    out.update(info)
    out["all_layers_factor"] = units.ratio(rep.all_layers_factor)
    out["rounding"] = ("bytes_per_token is exact (a float only for int4 with an odd value count); "
                       "totals round up to a whole byte; *_human fields use binary units, ≈ marks rounding")
    out["block_size"] = block_size
    out["bytes_per_block"] = units.as_number(rep.bytes_per_token * block_size)
    out["blocks_per_request"] = -(-tokens // block_size)
    out["paged_request_bytes"] = kv_capacity.paged_request_bytes(shape, dtype, tokens, block_size)
    if args.budget_gib is not None:
        gib = args.budget_gib
        if not math.isfinite(gib) or gib <= 0:
            raise CliError(f"--budget-gib must be a positive number, got {gib}")
        if gib > 1 << 30:
            raise CliError(f"--budget-gib {gib:g} is absurd (the limit is {1 << 30:,} GiB)")
        budget = kv_capacity.gib_bytes(gib)
        out["capacity"] = kv_capacity.capacity(shape, dtype, budget, tokens, block_size).to_dict()
    if args.max_len is not None:
        out["paging"] = kv_capacity.paging_comparison(shape, dtype, tokens, args.max_len, batch, block_size).to_dict()
    for warning in shape.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return out
