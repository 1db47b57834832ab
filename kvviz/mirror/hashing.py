"""Chained block hashes, byte-identical to vLLM 0.33.0 (``vllm/v1/core/kv_cache_utils.py``).

A block's hash is ``hash_fn((parent_hash, tuple(block_token_ids), extra_keys))``; the first block's
parent is ``NONE_HASH``. Extra keys are tagged with their source (``("cache_salt", salt)``,
``("lora", name, path)``, ``("mm", identifier, offset)``, ``("prompt_embeds", digest)``); KV events
publish them untagged (``to_event_extra_keys``). Only full blocks are hashed. Because every hash includes its parent, a block's
identity carries the whole prefix before it, like a git commit id.

Hash functions (all ``obj -> bytes``), as ``--prefix-caching-hash-algo`` names them:

- ``sha256``: SHA-256 over ``pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)`` (vLLM's default).
- ``sha256_cbor``: SHA-256 over ``cbor2.dumps(obj, canonical=True)`` (reproducible outside CPython).
- ``xxhash``: xxh3-128 over the same pickle bytes (fast, not cryptographic).
- ``xxhash_cbor``: xxh3-128 over the same CBOR bytes (fast, not cryptographic).
- ``python_hash``: Python's built-in ``hash`` as 8 bytes. Teaching only (not a vLLM option): it is
  salted per process (``PYTHONHASHSEED``) and 64-bit, so it is neither reproducible nor collision-safe.

NONE_HASH (the parent of every first block) is ``hash_fn(seed)``; ``resolve_none_hash_seed`` picks the
seed as vLLM's ``kv_cache_utils.resolve_none_hash_seed`` does: an explicit seed (vLLM:
``PYTHONHASHSEED``) wins; otherwise cryptographic algorithms use ``"vllm-none-hash"`` and the others a
random seed drawn once per process.
"""

from __future__ import annotations

import hashlib
import os
import pickle
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, NewType

import cbor2
import xxhash

from kvviz.errors import CodedError
from kvviz.mirror.limits import BlockSize

# The engine release whose hashing and KV events kvviz follows (docs/FIDELITY.md); the UI names it.
REFERENCE_RELEASE = "vLLM 0.33.0"

HashFn = Callable[[Any], bytes]
# The hash of one full block (vLLM: ``kv_cache_utils.BlockHash``), distinct from arbitrary bytes.
BlockHash = NewType("BlockHash", bytes)

DEFAULT_HASH = "sha256"  # vLLM's ``CacheConfig.prefix_caching_hash_algo`` default
# None = no explicit seed (vLLM: PYTHONHASHSEED unset); resolve_none_hash_seed then picks one.
DEFAULT_SEED: str | None = None
# vLLM's ``DEFAULT_NONE_HASH_SEED``: NONE_HASH seed of cryptographic algorithms when none is set.
DEFAULT_NONE_HASH_SEED = "vllm-none-hash"
# Token ids are vocabulary indices: non-negative and far below 2**32 for every real tokenizer.
MAX_TOKEN_ID = 2**32 - 1


def sha256(obj: Any) -> bytes:
    """SHA-256 digest (32 bytes) of ``pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)``, as vLLM's
    default ``sha256``."""
    return hashlib.sha256(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)).digest()


def xxhash_pickle(obj: Any) -> bytes:
    """xxh3-128 digest (16 bytes) of the same pickle bytes, as vLLM's ``xxhash``."""
    return xxhash.xxh3_128_digest(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))


def sha256_cbor(obj: Any) -> bytes:
    """SHA-256 digest (32 bytes) of the canonical CBOR encoding of ``obj``, as vLLM's ``sha256_cbor``."""
    return hashlib.sha256(cbor2.dumps(obj, canonical=True)).digest()


def xxhash_cbor(obj: Any) -> bytes:
    """xxh3-128 digest (16 bytes) of the canonical CBOR encoding of ``obj``, as vLLM's ``xxhash_cbor``."""
    return xxhash.xxh3_128_digest(cbor2.dumps(obj, canonical=True))


def python_hash(obj: Any) -> bytes:
    """Python's built-in ``hash(obj)`` as 8 big-endian bytes. UNSAFE: differs between processes
    unless ``PYTHONHASHSEED`` is fixed, and 64 bits collide far sooner than 256."""
    return hash(obj).to_bytes(8, "big", signed=True)


HASH_FUNCTIONS: dict[str, HashFn] = {
    "sha256": sha256,
    "sha256_cbor": sha256_cbor,
    "xxhash": xxhash_pickle,
    "xxhash_cbor": xxhash_cbor,
    "python_hash": python_hash,
}
# Names of hash functions the UI must flag as unsafe (not reproducible, not collision-resistant).
UNSAFE_HASHES: frozenset[str] = frozenset({"python_hash"})
# Not collision resistant: without an explicit seed their NONE_HASH seed is random (kept secret).
NON_CRYPTO_HASHES: frozenset[str] = frozenset({"xxhash", "xxhash_cbor", "python_hash"})
# Digest length in bytes for each hash function.
DIGEST_SIZES: dict[str, int] = {"sha256": 32, "sha256_cbor": 32, "xxhash": 16, "xxhash_cbor": 16,
                                "python_hash": 8}

# Reason codes of resolve_none_hash_seed (the view renders them as words).
SEED_EXPLICIT = "explicit"  # a seed was given (vLLM: PYTHONHASHSEED is set)
SEED_DEFAULT_CRYPTO = "default_crypto"  # cryptographic algorithm, fixed "vllm-none-hash"
SEED_RANDOM_NON_CRYPTO = "random_non_crypto"  # non-cryptographic algorithm, random per process


def get_hash_fn(name: str) -> HashFn:
    """The hash function registered under ``name``; ValueError listing the valid names otherwise."""
    try:
        return HASH_FUNCTIONS[name]
    except (KeyError, TypeError):
        valid = ", ".join(HASH_FUNCTIONS)
        raise CodedError(f"unknown hash function {name!r}; valid: {valid}", "unknown_hash",
                         name=repr(name)[:40], valid=valid) from None


def resolve_hash_fn(hash_fn: HashFn | str) -> HashFn:
    """Accept a hash function or its registered name."""
    return get_hash_fn(hash_fn) if isinstance(hash_fn, str) else hash_fn


def hash_name_of(hash_fn: HashFn | str) -> str:
    """The registered name of ``hash_fn`` (or its ``__name__`` when unregistered)."""
    if isinstance(hash_fn, str):
        get_hash_fn(hash_fn)
        return hash_fn
    for name, fn in HASH_FUNCTIONS.items():
        if fn is hash_fn:
            return name
    return getattr(hash_fn, "__name__", repr(hash_fn))


# One random seed per algorithm per process, as vLLM draws one per engine process.
_PROCESS_RANDOM_SEEDS: dict[str, str] = {}


def random_seed() -> str:
    """A fresh random seed string (32 random bytes as hex), the form vLLM draws."""
    return os.urandom(32).hex()


def resolve_none_hash_seed(hash_name: HashFn | str, seed: str | None = None, *,
                           per_process: bool = True) -> tuple[str, str]:
    """The NONE_HASH seed in force and its reason code (``SEED_*``).

    An explicit ``seed`` (vLLM: ``PYTHONHASHSEED``) wins; otherwise cryptographic algorithms use
    ``DEFAULT_NONE_HASH_SEED`` so independent processes agree, and non-cryptographic ones a random
    seed so collisions cannot be precomputed. vLLM resolves once per engine process; kvviz keeps one
    random seed per algorithm per process (``per_process=False`` draws a fresh one, as each call of
    vLLM's ``resolve_none_hash_seed`` does)."""
    if seed is not None:
        if not isinstance(seed, str):
            raise ValueError(f"seed must be a string or None, got {type(seed).__name__}")
        return seed, SEED_EXPLICIT
    name = hash_name_of(hash_name)
    if name in NON_CRYPTO_HASHES:
        fresh = random_seed()
        return (_PROCESS_RANDOM_SEEDS.setdefault(name, fresh) if per_process else fresh), SEED_RANDOM_NON_CRYPTO
    return DEFAULT_NONE_HASH_SEED, SEED_DEFAULT_CRYPTO


def init_none_hash(hash_fn: HashFn | str, seed: str | None = DEFAULT_SEED) -> BlockHash:
    """The parent hash of every first block: ``hash_fn(seed in force)``, the seed chosen by
    ``resolve_none_hash_seed`` (vLLM's ``init_none_hash``)."""
    in_force, _reason = resolve_none_hash_seed(hash_fn, seed)
    return BlockHash(resolve_hash_fn(hash_fn)(in_force))


def validate_token_ids(token_ids: Any, *, allow_empty: bool = False) -> tuple[int, ...]:
    """``token_ids`` as a tuple of ints in 0..2**32-1; a CodedError (a ValueError) naming the first bad
    entry otherwise (codes ``tokens_not_list``, ``token_not_int``, ``token_out_of_range``, ``no_tokens``)."""
    if isinstance(token_ids, (str, bytes, bytearray)):
        raise CodedError("token ids must be a list of integers, not a string", "tokens_not_list")
    try:
        tokens = tuple(token_ids)
    except TypeError:
        raise CodedError(f"token ids must be a list of integers, got {type(token_ids).__name__}",
                         "tokens_not_list") from None
    for i, t in enumerate(tokens):
        if isinstance(t, bool) or not isinstance(t, int):
            raise CodedError(f"token {i} is not an integer: {t!r}", "token_not_int", index=i, value=repr(t)[:40])
        if not 0 <= t <= MAX_TOKEN_ID:
            raise CodedError(f"token {i} is out of range 0..{MAX_TOKEN_ID}: {t}", "token_out_of_range",
                             index=i, value=t, high=MAX_TOKEN_ID)
    if not tokens and not allow_empty:
        raise CodedError("no tokens: at least one token id is needed", "no_tokens")
    return tokens


def hash_block_tokens(
    hash_fn: HashFn | str,
    parent_block_hash: BlockHash,
    curr_block_token_ids: Sequence[int],
    extra_keys: tuple[Any, ...] | None = None,
) -> BlockHash:
    """Hash of one full block: ``hash_fn((parent_block_hash, tuple(tokens), extra_keys))``.

    The first block's parent is ``NONE_HASH`` (see ``init_none_hash``); pass it explicitly.
    """
    if not parent_block_hash:
        raise ValueError("parent_block_hash is empty: the first block's parent is NONE_HASH")
    return BlockHash(resolve_hash_fn(hash_fn)((parent_block_hash, tuple(curr_block_token_ids), extra_keys)))


class MMFeature(NamedTuple):
    """A multimodal input placed in the token sequence: ``identifier`` (its content hash), the
    ``offset`` of its first placeholder token and its ``length`` in tokens."""

    identifier: str
    offset: int
    length: int


# Tags of the extra keys (vLLM 0.33.0 ``generate_block_hash_extra_keys``): each key names its source.
TAG_LORA = "lora"
TAG_MM = "mm"
TAG_CACHE_SALT = "cache_salt"
TAG_PROMPT_EMBEDS = "prompt_embeds"


def _lora_keys(lora_name: str | None, lora_path: str | None) -> list[tuple[str, str, str]]:
    """``[("lora", name, path)]`` for a LoRA request (vLLM requires a non-empty path), else []."""
    if not lora_name:
        return []
    if not lora_path or not isinstance(lora_path, str):
        raise ValueError("a LoRA adapter needs its path too: vLLM hashes (\"lora\", lora_name, lora_path)")
    return [(TAG_LORA, lora_name, lora_path)]


def _mm_keys(mm_features: Sequence[MMFeature], start: int, end: int) -> list[tuple[str, str, int]]:
    """``("mm", identifier, offset - start)`` for each multimodal input overlapping ``[start, end)``."""
    return [(TAG_MM, f.identifier, f.offset - start) for f in mm_features
            if f.offset < end and start < f.offset + f.length]


def generate_block_hash_extra_keys(
    start_token_idx: int,
    end_token_idx: int,
    *,
    lora_name: str | None = None,
    lora_path: str | None = None,
    mm_features: Sequence[MMFeature] = (),
    cache_salt: str | None = None,
    prompt_embeds_hash: bytes | None = None,
) -> tuple[Any, ...] | None:
    """Extra keys of the block ``[start, end)``, tagged and ordered as in vLLM 0.33.0: ``("lora", name,
    path)``, then ``("mm", identifier, offset - start)`` per multimodal input overlapping the block, then
    ``("cache_salt", salt)`` (first block only, ignored when empty), then ``("prompt_embeds", digest)``.
    None when there are none. (vLLM 0.23.0 put the bare values in this tuple.)"""
    keys: list[Any] = [*_lora_keys(lora_name, lora_path), *_mm_keys(mm_features, start_token_idx, end_token_idx)]
    if start_token_idx == 0 and cache_salt:
        keys.append((TAG_CACHE_SALT, cache_salt))
    if prompt_embeds_hash is not None:
        keys.append((TAG_PROMPT_EMBEDS, prompt_embeds_hash))
    return tuple(keys) if keys else None


def to_event_extra_keys(
    extra_keys: Sequence[tuple[Any, ...] | None] | None,
) -> list[tuple[Any, ...] | None] | None:
    """The per-block extra keys as KV events publish them (vLLM 0.33.0 ``to_event_extra_keys``): the tag
    dropped, so a bare LoRA name (no path), ``(identifier, offset)`` pairs, the bare salt and the bare
    embeds digest; None for an empty list."""
    if not extra_keys:
        return None
    return [None if keys is None else tuple(k[1:] if k[0] == TAG_MM else k[1] for k in keys)
            for keys in extra_keys]


def hash_block_chain(
    token_ids: Sequence[int],
    block_size: BlockSize,
    hash_fn: HashFn | str,
    none_hash: BlockHash,
    cache_salt: str | None = None,
    lora_name: str | None = None,
    start_block: int = 0,
    parent_block_hash: BlockHash | None = None,
    *,
    lora_path: str | None = None,
    mm_features: Sequence[MMFeature] = (),
) -> list[BlockHash]:
    """Hashes of the full blocks of ``token_ids`` from block ``start_block`` on (the hot path), each
    with the extra keys ``generate_block_hash_extra_keys`` gives its span.

    ``parent_block_hash`` is the hash of block ``start_block - 1`` (``none_hash`` when starting at 0);
    this is how a request extends its chain as decoded tokens fill new blocks.
    """
    if start_block > 0 and not parent_block_hash:
        raise ValueError("extending a chain from block > 0 needs the parent_block_hash of the block before")
    fn = resolve_hash_fn(hash_fn)
    tokens = token_ids if isinstance(token_ids, tuple) else tuple(token_ids)
    parent = none_hash if start_block == 0 else parent_block_hash
    num_full = len(tokens) // block_size
    hashes: list[BlockHash] = []
    append = hashes.append
    first = start_block
    lora = tuple(_lora_keys(lora_name, lora_path))
    if mm_features:  # per-block keys: the general (slower) path
        for i in range(first, num_full):
            start = i * block_size
            extra_i = generate_block_hash_extra_keys(start, start + block_size, lora_name=lora_name,
                                                     lora_path=lora_path, mm_features=mm_features,
                                                     cache_salt=cache_salt)
            parent = fn((parent, tokens[start:start + block_size], extra_i))
            append(parent)
        return hashes
    if first == 0 and num_full > 0 and cache_salt:
        # Only block 0 carries the salt; through the chain it still changes every later hash.
        parent = fn((parent, tokens[:block_size], (*lora, (TAG_CACHE_SALT, cache_salt))))
        append(parent)
        first = 1
    extra = lora or None
    starts = range(first * block_size, num_full * block_size, block_size)
    if fn is sha256_cbor or fn is xxhash_cbor:
        # Same bytes as calling fn, without one Python call per block (this loop is the hot path).
        digest = hashlib.sha256 if fn is sha256_cbor else xxhash.xxh3_128
        dumps = cbor2.dumps
        for start in starts:
            parent = digest(dumps((parent, tokens[start : start + block_size], extra), canonical=True)).digest()
            append(parent)
        return hashes
    if fn is sha256 or fn is xxhash_pickle:
        digest = hashlib.sha256 if fn is sha256 else xxhash.xxh3_128
        pdumps, proto = pickle.dumps, pickle.HIGHEST_PROTOCOL
        for start in starts:
            parent = digest(pdumps((parent, tokens[start : start + block_size], extra), protocol=proto)).digest()
            append(parent)
        return hashes
    for start in starts:
        parent = fn((parent, tokens[start : start + block_size], extra))
        append(parent)
    return hashes


@dataclass(frozen=True, slots=True)
class BlockHashRecord:
    """One logical block of a request: its token span ``[start, end)``, its tokens, its parent hash,
    and its own hash (None for a partial block, which is never hashed nor cached)."""

    index: int
    start: int
    end: int
    tokens: tuple[int, ...]
    parent: BlockHash
    hash: BlockHash | None
    full: bool
    extra_keys: tuple[Any, ...] | None

    @property
    def num_tokens(self) -> int:
        return self.end - self.start


def hash_request_blocks(
    token_ids: Sequence[int],
    block_size: BlockSize,
    hash_fn: HashFn | str,
    none_hash: BlockHash,
    cache_salt: str | None = None,
    lora_name: str | None = None,
    *,
    lora_path: str | None = None,
    mm_features: Sequence[MMFeature] = (),
) -> list[BlockHashRecord]:
    """Every block of a request, full blocks hashed through the chain, a trailing partial block
    (if any) with ``hash=None`` and the parent it would have once full; ``extra_keys`` tagged."""
    tokens = tuple(token_ids)
    hashes = hash_block_chain(tokens, block_size, hash_fn, none_hash, cache_salt, lora_name,
                              lora_path=lora_path, mm_features=mm_features)
    records: list[BlockHashRecord] = []
    parent = none_hash
    for index, start in enumerate(range(0, len(tokens), block_size)):
        end = min(start + block_size, len(tokens))
        full = end - start == block_size
        extra = generate_block_hash_extra_keys(start, end, lora_name=lora_name, lora_path=lora_path,
                                               mm_features=mm_features, cache_salt=cache_salt)
        own = hashes[index] if full else None
        records.append(BlockHashRecord(index, start, end, tokens[start:end], parent, own, full, extra))
        if own is not None:
            parent = own
    return records


def short_hash(h: bytes | None, n: int = 8) -> str:
    """The first ``n`` hex digits of a hash; an empty string for None (a partial block)."""
    return "" if h is None else h.hex()[:n]
