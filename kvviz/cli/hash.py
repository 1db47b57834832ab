"""``python -m kvviz hash``: the chained block hashes of a prompt, exactly as vLLM computes them."""

from __future__ import annotations

import argparse
import re
from typing import Any

from kvviz.cli import CliError, add_block_size_flag, add_json_flag
from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_SEED,
    HASH_FUNCTIONS,
    MAX_TOKEN_ID,
    REFERENCE_RELEASE,
    UNSAFE_HASHES,
    get_hash_fn,
    hash_request_blocks,
    init_none_hash,
    random_seed,
    resolve_none_hash_seed,
)
from kvviz.util.blank import is_blank

MAX_CLI_TOKENS = 1_000_000
UNSAFE_WARNING = (
    "python_hash is Python's built-in hash: salted per process and only 64 bits, so it is neither "
    "reproducible nor collision-safe; vLLM uses sha256 (its default), sha256_cbor, xxhash or xxhash_cbor."
)


def jsonable(value: Any) -> Any:
    """Extra keys for JSON: tuples as lists, bytes as hex."""
    if isinstance(value, (tuple, list)):
        return [jsonable(v) for v in value]
    return value.hex() if isinstance(value, bytes) else value


def parse_token_list(value: str, flag: str = "--tokens") -> list[int]:
    """Token ids from '1,2,3', '1 2 3' or '[1, 2, 3]'; CliError naming the first bad entry."""
    text = value.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    parts = [p for p in re.split(r"[,\s]+", text) if p]
    if not parts:
        raise CliError(f"{flag}: no token ids given (expected e.g. 1,2,3)")
    if len(parts) > MAX_CLI_TOKENS:
        raise CliError(f"{flag}: {len(parts):,} tokens is too many (at most {MAX_CLI_TOKENS:,})")
    tokens: list[int] = []
    for i, part in enumerate(parts):
        if not re.fullmatch(r"\d+", part):
            raise CliError(f"{flag}: entry {i} is not a non-negative integer: {part[:20]!r}")
        token = int(part)
        if token > MAX_TOKEN_ID:
            raise CliError(f"{flag}: entry {i} is out of range 0..{MAX_TOKEN_ID}: {part[:20]}")
        tokens.append(token)
    return tokens


def tokens_from_text(text: str, flag: str = "--text", model_name: str | None = None) -> tuple[list[int], str | None]:
    """Token ids of ``text`` from the embedded model's tokenizer (or ``model_name``'s: a Hugging Face id or
    folder), and a truncation notice if any."""
    if is_blank(text):
        raise CliError(f"{flag}: the text is empty")
    try:
        from kvviz.model import InputError, ModelLoadError, tokenize  # imports torch: only when needed
    except ImportError as exc:
        raise CliError(f"{flag} needs the embedded model's tokenizer, which is unavailable ({exc}); "
                       "pass token ids with --tokens instead") from exc
    try:
        tokenized = tokenize(text, model_name=model_name)
    except (InputError, ModelLoadError) as exc:
        raise CliError(f"{flag}: {exc}") from exc
    return list(tokenized.ids), getattr(tokenized, "notice", None)


def add_hash_options(p: argparse.ArgumentParser) -> None:
    """--block-size, --hash, --seed and --no-seed, shared by ``hash`` and ``diff``."""
    add_block_size_flag(p)
    p.add_argument("--hash", default=DEFAULT_HASH,
                   help=f"hash function: {', '.join(HASH_FUNCTIONS)} (default {DEFAULT_HASH})")
    p.add_argument("--seed", default=DEFAULT_SEED,
                   help="NONE_HASH = hash(seed), as vLLM does with PYTHONHASHSEED. Default: vLLM's rule, "
                   "the fixed seed 'vllm-none-hash' for sha256/sha256_cbor, a random one for xxhash/xxhash_cbor")
    p.add_argument("--no-seed", action="store_true",
                   help="a fresh random seed for every algorithm (what vLLM did before 2026-08): hashes "
                   "change on every run")


def check_hash_options(args: argparse.Namespace) -> tuple[Any, str | None]:
    """Validate the shared options; return (hash function, seed or None)."""
    try:
        hash_fn = get_hash_fn(args.hash)
    except ValueError as exc:
        raise CliError(str(exc)) from exc
    return hash_fn, random_seed() if args.no_seed else args.seed


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "hash",
        help="chained block hashes of a prompt (vLLM-identical)",
        description="Split a prompt into blocks and hash every full block with its parent's hash, "
        "byte-identical to vLLM v1. A trailing partial block is listed with hash null.",
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--tokens", help="token ids, e.g. 1,2,3 (no model needed)")
    src.add_argument("--text", help="text, tokenized with the embedded model's tokenizer")
    add_hash_options(p)
    add_request_key_options(p)
    add_json_flag(p)
    p.set_defaults(handler=run)


def add_request_key_options(p: argparse.ArgumentParser) -> None:
    """--salt, --lora-name and --lora-path: the request fields vLLM mixes into block hashes."""
    p.add_argument("--salt", default=None, help="cache salt: block 0 hashes (\"cache_salt\", SALT) as vLLM 0.33.0")
    p.add_argument("--lora-name", default=None, help="LoRA adapter name: every block hashes (\"lora\", NAME, PATH)")
    p.add_argument("--lora-path", default=None, help="the adapter's path (vLLM requires one with --lora-name)")


def check_request_keys(args: argparse.Namespace) -> dict[str, str | None]:
    """The salt and LoRA flags as keyword arguments of the hashing functions; CliError when a LoRA name
    comes without its path."""
    if args.lora_name and not args.lora_path:
        raise CliError("--lora-name needs --lora-path: vLLM hashes the adapter's name and path")
    if args.lora_path and not args.lora_name:
        raise CliError("--lora-path needs --lora-name")
    return {"cache_salt": args.salt or None, "lora_name": args.lora_name or None, "lora_path": args.lora_path or None}


def run(args: argparse.Namespace) -> dict[str, Any]:
    hash_fn, seed = check_hash_options(args)
    keys = check_request_keys(args)
    notice = None
    if args.tokens is not None:
        tokens = parse_token_list(args.tokens)
    else:
        tokens, notice = tokens_from_text(args.text)
    in_force, reason = resolve_none_hash_seed(args.hash, seed)
    none_hash = init_none_hash(hash_fn, in_force)
    records = hash_request_blocks(tokens, args.block_size, hash_fn, none_hash, keys["cache_salt"], keys["lora_name"],
                                  lora_path=keys["lora_path"])
    secret = reason == "random_non_crypto" or args.no_seed
    out: dict[str, Any] = {
        "reference": REFERENCE_RELEASE,
        "none_hash": none_hash.hex(),
        "hash": args.hash,
        "none_hash_seed": None if secret else in_force,
        "none_hash_seed_reason": "random" if args.no_seed else reason,
        "blocks": [
            {
                "index": r.index,
                "start": r.start,
                "end": r.end,
                "tokens": list(r.tokens),
                "parent": r.parent.hex(),
                "hash": r.hash.hex() if r.hash is not None else None,
                "full": r.full,
                "extra_keys": jsonable(r.extra_keys),
            }
            for r in records
        ],
    }
    if args.hash in UNSAFE_HASHES:
        out["warning"] = UNSAFE_WARNING
    if notice:
        out["notice"] = notice
    return out
