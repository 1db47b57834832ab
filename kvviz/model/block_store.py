"""A process-wide, content-addressed store of captured K/V, one entry per full block.

An entry is keyed by ``(model_key, block_hash)`` where ``block_hash`` is the block's chained hash from
``kvviz.mirror.hashing`` (the engine's own code), under the algorithm and NONE_HASH seed the page shows
(vLLM's defaults, sha256 and "vllm-none-hash", unless a page passes others) (so it carries the whole prefix before the block, and the cache salt through the
first block). Looking up a prompt walks its block hashes from the start and stops at the first
missing block, exactly like an engine's ``find_longest_cache_hit``: a block after a miss is useless
because its K/V assume the missing prefix.

Invariants:

- the stored bytes never exceed the budget (``KVVIZ_KVSTORE_MB``, default 512 MiB); when a put would
  exceed it, least-recently-used entries are evicted first;
- a request's blocks are touched tail first, head last, so its head blocks are the most recently used
  and its tail is evicted before its head (as vLLM frees a request's blocks in reverse order);
- stored tensors are private copies (on the CPU, or on the model's device when ``prefill_cached``
  stores them) and are never modified; callers must not modify the tensors a lookup returns;
- every method holds one re-entrant lock, so concurrent sessions see a consistent store.

The process-wide store and the prefill through it (``prefill_cached``) are ``kvviz.model.kvstore``.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_SEED,
    hash_block_chain,
    init_none_hash,
    short_hash,
)
from kvviz.model.loader import LoadedModel
from kvviz.model.settings import InputError
from kvviz.settings import DEFAULT_KVSTORE_MB, settings

#: The store's default keying: vLLM's default algorithm and seed resolution (sha256 over pickle,
#: NONE_HASH from "vllm-none-hash"). Pages that show another algorithm or seed pass theirs.
STORE_HASH = DEFAULT_HASH
STORE_SEED = DEFAULT_SEED
DEFAULT_BUDGET_MB = DEFAULT_KVSTORE_MB  # kvviz.settings
ENV_BUDGET = "KVVIZ_KVSTORE_MB"

_NONE_HASH = init_none_hash(STORE_HASH, STORE_SEED)


def model_key(lm: LoadedModel) -> str:
    """The namespace of a model's blocks: the same tokens give different K/V in another model,
    on another device or in another dtype."""
    return f"{lm.source.key}|{lm.info.device}|{lm.info.dtype}"


def store_block_hashes(token_ids: Sequence[int], block_size: int, cache_salt: str | None = None, *,
                       hash_name: str = STORE_HASH, seed: str | None = STORE_SEED) -> list[bytes]:
    """The chained hashes the store uses for the full blocks of ``token_ids`` (partial tail excluded):
    the engine's hashing code under ``hash_name`` and ``seed`` (default: vLLM's defaults)."""
    none_hash = _NONE_HASH if (hash_name, seed) == (STORE_HASH, STORE_SEED) else init_none_hash(hash_name, seed)
    return hash_block_chain(tuple(token_ids), block_size, hash_name, none_hash, cache_salt=cache_salt or None)


def budget_from_env() -> tuple[int, str | None]:
    """The budget in bytes from ``KVVIZ_KVSTORE_MB`` (default 512 MiB) and a note when it was invalid.
    ``0`` disables the store (nothing is kept)."""
    parsed = settings()  # kvviz.settings: an invalid value leaves the default and its note
    return parsed.kvstore_budget_bytes, parsed.errors.get(ENV_BUDGET)


@dataclass
class StoredBlock:
    """The K/V of one full block: ``kv`` is ``[layers, 2 (K, V), kv_heads, block_tokens, head_dim]``."""

    block_hash: bytes
    model_key: str
    kv: torch.Tensor
    token_ids: tuple[int, ...]
    parent_hash: bytes
    owner: str | None = None
    created_at: float = field(default_factory=time.time)
    last_used_at: float = field(default_factory=time.time)
    hits: int = 0

    @property
    def nbytes(self) -> int:
        return self.kv.numel() * self.kv.element_size()

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


@dataclass(frozen=True)
class StoreStats:
    """A snapshot of the store's counters. ``hit_blocks``/``miss_blocks`` count blocks over all lookups
    (a lookup counts one miss when it stops before the end of the request)."""

    budget_bytes: int
    bytes: int
    blocks: int
    lookups: int
    hit_blocks: int
    miss_blocks: int
    hit_tokens: int
    put_blocks: int
    evictions: int
    evicted_bytes: int
    budget_note: str | None = None

    def as_dict(self) -> dict[str, object]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class EntryInfo:
    """One entry as a plain record, for tables: LRU rank 0 is the next to be evicted."""

    lru_rank: int
    model_key: str
    short_hash: str
    parent_short_hash: str
    num_tokens: int
    nbytes: int
    hits: int
    owner: str | None
    created_at: float
    last_used_at: float


class KVStore:
    """Content-addressed K/V blocks under a byte budget with LRU eviction (see the module docstring)."""

    def __init__(self, budget_bytes: int | None = None, budget_note: str | None = None) -> None:
        if budget_bytes is None:
            budget_bytes, budget_note = budget_from_env()
        if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 0:
            raise InputError(f"the KV store budget must be a non-negative number of bytes, got {budget_bytes!r}")
        self._budget = budget_bytes
        self._budget_note = budget_note
        self._lock = threading.RLock()
        # (model_key, hash) -> block; order = LRU (first) ... MRU (last)
        self._blocks: OrderedDict[tuple[str, bytes], StoredBlock] = OrderedDict()
        self._bytes = 0
        self._lookups = self._hit_blocks = self._miss_blocks = self._hit_tokens = 0
        self._put_blocks = self._evictions = self._evicted_bytes = 0

    # ------------------------------------------------------------------ queries

    @property
    def budget_bytes(self) -> int:
        return self._budget

    def set_budget(self, budget_bytes: int) -> int:
        """Change the budget; evicts LRU entries until it holds. Returns the number evicted."""
        if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) or budget_bytes < 0:
            raise InputError(f"the KV store budget must be a non-negative number of bytes, got {budget_bytes!r}")
        with self._lock:
            self._budget = budget_bytes
            self._budget_note = None
            return self._evict_until(0)

    def peek(self, model_key: str, block_hashes: Sequence[bytes]) -> int:
        """How many leading blocks are stored, without touching them or counting a lookup."""
        with self._lock:
            n = 0
            for h in block_hashes:
                if (model_key, h) not in self._blocks:
                    break
                n += 1
            return n

    def lookup(self, model_key: str, block_hashes: Sequence[bytes], max_blocks: int | None = None) -> list[StoredBlock]:
        """The longest run of stored blocks from the first hash on (at most ``max_blocks``).

        Found blocks are touched (most recently used, head last) and counted as hits; stopping
        before the end of ``block_hashes`` counts one miss.
        """
        limit = len(block_hashes) if max_blocks is None else max(0, min(max_blocks, len(block_hashes)))
        now = time.time()
        with self._lock:
            found: list[StoredBlock] = []
            for h in block_hashes[:limit]:
                block = self._blocks.get((model_key, h))
                if block is None:
                    break
                found.append(block)
            for block in reversed(found):
                block.hits += 1
                block.last_used_at = now
                self._blocks.move_to_end((model_key, block.block_hash))
            self._lookups += 1
            self._hit_blocks += len(found)
            self._hit_tokens += sum(b.num_tokens for b in found)
            if len(found) < limit:
                self._miss_blocks += 1
            return found

    def stats(self) -> StoreStats:
        with self._lock:
            return StoreStats(
                budget_bytes=self._budget,
                bytes=self._bytes,
                blocks=len(self._blocks),
                lookups=self._lookups,
                hit_blocks=self._hit_blocks,
                miss_blocks=self._miss_blocks,
                hit_tokens=self._hit_tokens,
                put_blocks=self._put_blocks,
                evictions=self._evictions,
                evicted_bytes=self._evicted_bytes,
                budget_note=self._budget_note,
            )

    def entries(self, model_key: str | None = None) -> list[EntryInfo]:
        """Every entry (or one model's), least recently used first."""
        with self._lock:
            return [
                EntryInfo(rank, b.model_key, short_hash(b.block_hash), short_hash(b.parent_hash), b.num_tokens,
                          b.nbytes, b.hits, b.owner, b.created_at, b.last_used_at)
                for rank, b in enumerate(self._blocks.values())
                if model_key is None or b.model_key == model_key
            ]

    def __len__(self) -> int:
        with self._lock:
            return len(self._blocks)

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return key in self._blocks

    # ------------------------------------------------------------------ updates

    def put(
        self,
        model_key: str,
        block_hashes: Sequence[bytes],
        keys: Sequence[torch.Tensor],
        values: Sequence[torch.Tensor],
        token_ids: Sequence[int],
        block_size: int,
        *,
        start_block: int = 0,
        owner: str | None = None,
        device: torch.device | str | None = None,
        none_hash: bytes = _NONE_HASH,
    ) -> int:
        """Store blocks ``start_block ..`` of a prompt whose full-block hashes are ``block_hashes``.

        ``keys``/``values`` are the prompt's per-layer ``[kv_heads, tokens, head_dim]`` tensors covering
        at least those blocks; copies are kept on ``device`` (default: the CPU). Blocks already stored
        are only touched. Returns the number of new blocks.
        """
        target = torch.device(device) if device is not None else torch.device("cpu")
        if len(keys) != len(values) or not keys:
            raise InputError("put needs one K and one V tensor per layer")
        available = min(int(keys[0].shape[1]), len(token_ids)) // block_size
        end_block = min(len(block_hashes), available)
        if start_block >= end_block:
            return 0
        block_bytes = 2 * len(keys) * keys[0].shape[0] * block_size * keys[0].shape[2] * keys[0].element_size()
        if block_bytes > self._budget:
            return 0
        with self._lock:
            missing = [i for i in range(start_block, end_block) if (model_key, block_hashes[i]) not in self._blocks]
        new_blocks: dict[int, torch.Tensor] = {}
        if missing:
            lo, hi = missing[0] * block_size, (missing[-1] + 1) * block_size
            with torch.inference_mode():
                k = torch.stack([t[:, lo:hi].detach().to(target) for t in keys])
                v = torch.stack([t[:, lo:hi].detach().to(target) for t in values])
                kv = torch.stack([k, v], dim=1)  # [layers, 2, kv_heads, tokens, head_dim]
                for i in missing:
                    s = i * block_size - lo
                    new_blocks[i] = kv[:, :, :, s : s + block_size].clone()
        now = time.time()
        added = 0
        with self._lock:
            # head last: walk the chain backwards so block 0 ends up most recently used
            for i in reversed(range(start_block, end_block)):
                key = (model_key, block_hashes[i])
                block = self._blocks.get(key)
                if block is not None:
                    block.last_used_at = now
                    self._blocks.move_to_end(key)
                    continue
                tensor = new_blocks.get(i)
                if tensor is None:  # stored meanwhile by another thread, then evicted: skip
                    continue
                parent = block_hashes[i - 1] if i > 0 else none_hash
                tokens = tuple(int(t) for t in token_ids[i * block_size : (i + 1) * block_size])
                block = StoredBlock(block_hashes[i], model_key, tensor, tokens, parent, owner, now, now)
                self._blocks[key] = block
                self._bytes += block.nbytes
                self._put_blocks += 1
                added += 1
            self._evict_until(0)
        return added

    def clear(self) -> None:
        """Drop every entry and reset the counters."""
        with self._lock:
            self._blocks.clear()
            self._bytes = 0
            self._lookups = self._hit_blocks = self._miss_blocks = self._hit_tokens = 0
            self._put_blocks = self._evictions = self._evicted_bytes = 0

    def _evict_until(self, extra: int) -> int:
        """Evict LRU entries until ``bytes + extra <= budget``; the caller holds the lock."""
        evicted = 0
        while self._blocks and self._bytes + extra > self._budget:
            _, block = self._blocks.popitem(last=False)
            self._bytes -= block.nbytes
            self._evictions += 1
            self._evicted_bytes += block.nbytes
            evicted += 1
        return evicted


def concat_blocks(blocks: Sequence[StoredBlock], device: torch.device | str | None = None,
                  dtype: torch.dtype | None = None) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Per-layer K and V ``[kv_heads, tokens, head_dim]`` of consecutive stored blocks, as a new tensor
    (never a view of a stored block), on ``device`` in ``dtype`` when given."""
    if not blocks:
        return [], []
    kv = torch.cat([b.kv for b in blocks], dim=3)
    if device is not None or dtype is not None:
        kv = kv.to(device=device, dtype=dtype)
    return [kv[layer, 0] for layer in range(kv.shape[0])], [kv[layer, 1] for layer in range(kv.shape[0])]


__all__ = [
    "DEFAULT_BUDGET_MB",
    "ENV_BUDGET",
    "STORE_HASH",
    "STORE_SEED",
    "EntryInfo",
    "KVStore",
    "StoreStats",
    "StoredBlock",
    "budget_from_env",
    "concat_blocks",
    "model_key",
    "store_block_hashes",
]
