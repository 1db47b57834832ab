"""The process-wide K/V store and the prefill through it: ``prefill_cached`` looks up a prompt's longest
stored prefix (whole blocks), runs the model only on the rest and stores the new full blocks.

The store itself (keying, LRU eviction under a byte budget) is ``kvviz.model.block_store``.
Invariant: reuse stops one token short of the prompt (the last token is always recomputed for its
logits), and the model runs under ``lm.lock``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from kvviz.mirror.hashing import init_none_hash
from kvviz.model.block_store import (
    STORE_HASH,
    STORE_SEED,
    KVStore,
    concat_blocks,
    model_key,
    store_block_hashes,
)
from kvviz.model.kv_cache import LenderFailed
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import ForwardTiming, forward_request, prefill
from kvviz.model.settings import InputError

_STORE: KVStore | None = None
_STORE_LOCK = threading.Lock()


def get_kv_store() -> KVStore:
    """The process-wide store, created on first use with the budget from ``KVVIZ_KVSTORE_MB``."""
    global _STORE
    with _STORE_LOCK:
        if _STORE is None:
            _STORE = KVStore()
        return _STORE


@dataclass
class CachedPrefill:
    """A prompt's prefill through the store: which blocks came from it and what the model computed.

    ``keys``/``values`` cover the whole prompt (reused prefix + computed tail), per layer
    ``[kv_heads, tokens, head_dim]``, on the model's device. ``forward_ms`` times only the model (the
    non-reused tokens; this request's share of the pass when it was batched with others);
    ``wait_ms`` the wait for the model; ``lookup_ms`` the store lookup and the assembly of the reused
    K/V; ``total_ms`` the whole call, storing included.
    """

    token_ids: list[int]
    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    last_logits: torch.Tensor  # [vocab], float32, CPU
    block_size: int
    block_hashes: list[bytes]
    hit_blocks: int
    reused_tokens: int
    computed_tokens: int
    stored_blocks: int
    lookup_ms: float
    forward_ms: float
    total_ms: float
    wait_ms: float = 0.0
    pass_ms: float = 0.0
    batch_size: int = 1

    @property
    def num_tokens(self) -> int:
        return len(self.token_ids)


def reusable_blocks(num_tokens: int, block_size: int, hit_blocks: int) -> int:
    """Hit blocks an engine may use: at most ``(num_tokens - 1) // block_size``, because the last
    prompt token is always recomputed to get a query for the next-token logits."""
    return max(0, min(hit_blocks, (num_tokens - 1) // block_size))


def _cache_layers(cache: object) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(K, V) of every layer of a KV cache (transformers' or the native one), each ``[1, kv_heads, tokens, head_dim]``."""
    layers = getattr(cache, "layers", None)
    if layers is None:
        return [(k, v) for k, v, *_ in cache]  # type: ignore[attr-defined]
    return [(layer.keys, layer.values) for layer in layers]


def _continue(lm: LoadedModel, cache: Any, new_ids: list[int], on_queued: Callable[[Any], None] | None = None,
              ) -> tuple[list[torch.Tensor], list[torch.Tensor], torch.Tensor, ForwardTiming]:
    """Run ``new_ids`` after ``cache`` (a stored prefix's K/V, never modified: the cache grows by
    concatenation into new tensors; or a borrowed prefix). Returns the whole K/V, the last logits and the
    forward's timing; unlike ``prefill_continue`` it neither re-tokenizes nor copies the K/V to the CPU."""
    out, logits, timing = forward_request(lm, new_ids, cache, on_queued)
    pairs = _cache_layers(out)
    return [k[0] for k, _ in pairs], [v[0] for _, v in pairs], logits, timing


@dataclass(frozen=True)
class Loan:
    """The first ``tokens`` positions of another prompt's cache, which that prompt's forward request (in
    the queue, running, or done) computes: a prompt may start from them instead of the store."""

    cache: Any
    tokens: int


def prefill_cached(
    lm: LoadedModel,
    token_ids: Sequence[int],
    block_size: int = 16,
    *,
    cache_salt: str | None = None,
    store: KVStore | None = None,
    max_reuse_tokens: int | None = None,
    save: bool = True,
    owner: str | None = None,
    hash_name: str = STORE_HASH,
    seed: str | None = STORE_SEED,
    loan: Loan | None = None,
    on_queued: Callable[[Any], None] | None = None,
) -> CachedPrefill:
    """Prefill ``token_ids`` reusing the longest stored prefix (whole blocks, last token recomputed).

    ``max_reuse_tokens`` caps the reuse (an experiment that must recompute a given tail); ``save``
    stores the prompt's new full blocks afterwards (on the model's device). The model runs under
    ``lm.lock``. With a ``loan`` (whole blocks, within those limits; native decoder) the prefix comes
    from another prompt's forward request instead of the store, in the same pass when it is still
    queued; if that request fails, the prompt goes the store's way. ``on_queued(cache)`` runs once this
    prompt's own request is queued.
    """
    start = time.perf_counter()
    store = get_kv_store() if store is None else store
    ids = [int(t) for t in token_ids]
    if not ids:
        raise InputError("no tokens: at least one token id is needed")
    vocab = lm.info.vocab_size
    if any(not 0 <= t < vocab for t in ids):
        raise InputError(f"a token id is outside the vocabulary (0..{vocab - 1})")
    hashes = store_block_hashes(ids, block_size, cache_salt, hash_name=hash_name, seed=seed)
    key = model_key(lm)
    limit = reusable_blocks(len(ids), block_size, len(hashes))
    if max_reuse_tokens is not None:
        limit = min(limit, max(0, int(max_reuse_tokens)) // block_size)
    outcome = None
    if loan is not None and lm.packs_batches and 0 < loan.tokens <= limit * block_size and loan.tokens % block_size == 0:
        lookup_ms = (time.perf_counter() - start) * 1000.0
        try:
            outcome = _continue(lm, lm.borrowing_cache(loan.cache, loan.tokens), ids[loan.tokens :])
            reused = loan.tokens
        except LenderFailed:
            outcome = None
    if outcome is None:
        found = store.lookup(key, hashes, max_blocks=limit) if limit > 0 else []
        reused = len(found) * block_size
        lookup_ms = (time.perf_counter() - start) * 1000.0
        if found:
            prefix_k, prefix_v = concat_blocks(found, device=lm.device, dtype=lm.torch_dtype)
            lookup_ms = (time.perf_counter() - start) * 1000.0
            data = [(k.unsqueeze(0), v.unsqueeze(0)) for k, v in zip(prefix_k, prefix_v, strict=True)]
            outcome = _continue(lm, lm.new_cache(data), ids[reused:], on_queued)
        else:
            result = prefill(lm, token_ids=ids, max_tokens=max(1, len(ids)), on_queued=on_queued)
            outcome = (result.keys, result.values, result.last_logits,
                       ForwardTiming(result.prefill_ms, result.wait_ms, result.pass_ms, result.batch_size, 0))
    keys, values, logits, timing = outcome
    stored = 0
    if save:
        # from block 0: reused blocks are only touched, so the head ends up most recently used
        stored = store.put(key, hashes, keys, values, ids, block_size, owner=owner, device=lm.device,
                           none_hash=init_none_hash(hash_name, seed))
    return CachedPrefill(
        token_ids=ids,
        keys=keys,
        values=values,
        last_logits=logits,
        block_size=block_size,
        block_hashes=hashes,
        hit_blocks=reused // block_size,
        reused_tokens=reused,
        computed_tokens=len(ids) - reused,
        stored_blocks=stored,
        lookup_ms=round(lookup_ms, 3),
        forward_ms=timing.compute_ms,
        total_ms=round((time.perf_counter() - start) * 1000.0, 3),
        wait_ms=timing.wait_ms,
        pass_ms=timing.pass_ms,
        batch_size=timing.batch_size,
    )


__all__ = [
    "CachedPrefill",
    "get_kv_store",
    "prefill_cached",
    "reusable_blocks",
]
