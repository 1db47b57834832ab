"""``python -m kvviz prefill``: run one real prefill and report the model card and measured KV bytes."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from kvviz.cli import CliError, add_json_flag, check_model_option


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "prefill",
        help="prefill a text on the real model and measure its K/V cache",
        description="Run one prefill on the real model, capture every layer's K and V, and report "
        "the measured KV bytes. The model is the embedded SmolLM2-135M-Instruct unless "
        "--model or KVVIZ_MODEL names another.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--text", help="the prompt text")
    src.add_argument("--file", help="read the prompt from a UTF-8 text file ('-' for stdin)")
    p.add_argument("--model", default=None, help="'embedded' (default), a Hugging Face id, or a local folder")
    p.add_argument("--device", default=None, help="auto (default), cpu, cuda, cuda:N or mps")
    p.add_argument("--dtype", default=None, help="auto (default: bf16 on CUDA, fp32 otherwise), float32, bfloat16, float16")
    p.add_argument("--backend", default=None, choices=("auto", "native", "transformers"),
                   help="forward pass: auto (default: kvviz's native Llama decoder for the embedded model, "
                   "transformers otherwise), native, transformers; both give the same logits and K/V")
    p.add_argument("--max-tokens", type=int, default=None, help="token limit; longer input is truncated (default 2048)")
    p.add_argument("--tokens", action="store_true", help="also list token ids and their text pieces")
    add_json_flag(p)
    p.set_defaults(handler=run)


def _read_text(args: argparse.Namespace) -> str:
    if args.text is not None:
        return args.text
    try:
        raw = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
    except OSError as exc:
        raise CliError(f"cannot read {args.file}: {exc.strerror or exc}") from exc
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CliError(f"{args.file} is not UTF-8 text (byte {exc.start}): kvviz reads text, not binary files") from exc


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Load the model, prefill the text, and return the model card plus the measurements."""
    check_model_option(args.model)
    text = _read_text(args)
    from kvviz.model import InputError, ModelLoadError, load_model, prefill  # torch only when needed
    from kvviz.model.settings import check_max_tokens
    from kvviz.model.tokens import clean_text

    try:
        clean_text(text)  # reject empty input and a bad limit before paying for a model load
        if args.max_tokens is not None:
            check_max_tokens(args.max_tokens)
        lm = load_model(args.model, device=args.device, dtype=args.dtype, backend=args.backend)
        result = prefill(lm, text=text, max_tokens=args.max_tokens)
    except (InputError, ModelLoadError) as exc:
        raise CliError(str(exc)) from exc
    info = lm.info
    next_id = int(result.last_logits.argmax())
    out: dict[str, Any] = {
        "model": info.name,
        "model_id": info.model_id,
        "source": info.source,
        "device": result.device,
        "dtype": result.dtype,
        "backend": info.backend,
        "num_tokens": result.num_tokens,
        "num_tokens_before_truncation": result.num_tokens_before_truncation,
        "truncated": result.truncated,
        "notice": result.notice,
        "num_layers": info.num_layers,
        "num_heads": info.num_heads,
        "num_kv_heads": info.num_kv_heads,
        "head_dim": info.head_dim,
        "d_model": info.d_model,
        "attention": info.attention_kind,
        "element_size": info.element_size,
        "num_params": info.num_params,
        "kv_bytes_measured": result.kv_bytes_measured,
        "kv_bytes_per_token": result.kv_bytes_per_token,
        "kv_bytes_per_token_formula": info.kv_bytes_per_token_config,
        "prefill_ms": result.prefill_ms,
        "load_s": info.load_s,
        "next_token_id": next_id,
        "next_token": lm.tokenizer.decode([next_id]),
    }
    if args.tokens:
        out["token_ids"] = result.token_ids
        out["pieces"] = result.pieces
    return out
