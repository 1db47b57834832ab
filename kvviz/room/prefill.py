"""The room's prefill path and its K/V store.

``room_prefill`` is the one path every room prompt takes (the room page, the concurrency benchmark and
the security experiments): the room admits the prompt (longest cached prefix under the session's salt),
then the model prefills it reusing at most that prefix from the room's K/V store, then the new full
blocks are stored. The latency it reports is the wall time up to the last prompt token's logits
(K/V-store lookup + forward; storing happens after), which is what an outside observer can time.

Every forward pass goes through the model's batching scheduler (``kvviz.model.prefill.scheduler_for``),
so any number of sessions may call it at once: room prompts that arrive together share a pass.
Experiments run in private rooms (``EXPERIMENT_LIMITS``) with private K/V stores: they neither read nor
disturb the shared room.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from kvviz.model.batching import batch_origin, current_origin
from kvviz.model.block_store import KVStore, model_key, store_block_hashes
from kvviz.model.kvstore import CachedPrefill, prefill_cached, reusable_blocks
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import scheduler_for
from kvviz.model.settings import InputError
from kvviz.model.tokens import tokenize
from kvviz.room.limits import RoomLimits
from kvviz.room.records import Admission
from kvviz.room.room import Room
from kvviz.security.inflight import inflight_for
from kvviz.settings import settings

ENV_ROOM_KV_MB = "KVVIZ_ROOM_KV_MB"
#: How long a pass may wait for the prompts that borrow its prefix to queue behind it.
LEND_HOLD_S = 0.05
#: Limits of the private rooms the experiments use: no rate limits (one caller), a roomy pool.
EXPERIMENT_LIMITS = RoomLimits(num_blocks=4096, max_prompt_tokens=2048, burst=1_000_000,
                               refill_per_s=1e6, room_burst=10_000_000, room_refill_per_s=1e6)

# ----------------------------------------------------------------------------- the room's K/V store

_STORES: dict[int, KVStore] = {}
_STORES_LOCK = threading.Lock()


def room_kv_budget_bytes() -> int:
    """The room K/V store budget: ``KVVIZ_ROOM_KV_MB`` (0..65536 MiB) or 384 MiB."""
    return settings().room_kv_budget_bytes


def room_kv_store(room: Room, budget_bytes: int | None = None) -> KVStore:
    """The K/V store that holds the tensors of ``room``'s blocks (one per room, LRU under its budget),
    emptied whenever the room is reset."""
    key = id(room)
    with _STORES_LOCK:
        store = _STORES.get(key)
        if store is None:
            store = KVStore(room_kv_budget_bytes() if budget_bytes is None else budget_bytes)
            _STORES[key] = store
            room.add_reset_hook(store.clear)
            weakref.finalize(room, _STORES.pop, key, None)
        return store


# ----------------------------------------------------------------------------- one room prompt


@dataclass
class RoomPrefill:
    """One prompt through the room: the room's admission and, when admitted, the measured prefill.

    ``latency_ms``: wall time to the last prompt token's logits (lookup + queue + forward);
    ``compute_ms``: the K/V-store lookup plus the forward pass (the request's share of it when it rode
    in a batch); ``wait_ms``: time queued for the model, or waiting for another prompt to store shared
    blocks (``kvviz.security.inflight``); ``forward_ms``: the forward pass alone;
    ``reused_tokens``: K/V taken from the store (at most the room's hit)."""

    admission: Admission
    cached: CachedPrefill | None = None
    latency_ms: float = 0.0
    forward_ms: float = 0.0
    reused_tokens: int = 0
    computed_tokens: int = 0
    stored_blocks: int = 0
    notice: str | None = None
    compute_ms: float = 0.0
    wait_ms: float = 0.0

    @property
    def ok(self) -> bool:
        return self.admission.ok and self.cached is not None

    @property
    def last_logits(self) -> torch.Tensor | None:
        """The next-token logits after the prompt (None when the room refused it)."""
        return None if self.cached is None else self.cached.last_logits


def room_prefill(lm: LoadedModel, room: Room, session_id: str, text: str | None = None,
                 token_ids: Sequence[int] | None = None, *, store: KVStore | None = None,
                 save: bool = True) -> RoomPrefill:
    """Send one prompt (text or token ids) from ``session_id`` to ``room`` and prefill it on the model.

    Text is tokenized whole (so the room reports its real token count; the tokenizer's own character
    ceiling applies) and the room keeps its first ``max_prompt_tokens`` tokens. Raises InputError for
    empty text; a prompt the room refuses comes back with ``ok`` False. The room records the compute
    time and the wait apart (its hit/miss medians compare compute)."""
    if (text is None) == (token_ids is None):
        raise InputError("give exactly one of text or token_ids")
    notice = None
    before = None
    if text is not None:
        tok = tokenize(text, model_name=lm.source.key, max_tokens=room.limits.max_prompt_tokens)
        ids: Sequence[int] = tok.ids
        before = tok.num_tokens_before_truncation
        notice = tok.notice if tok.truncated else None
    else:
        ids = list(token_ids)  # type: ignore[arg-type]
    adm = room.submit(session_id, ids, num_tokens_before_truncation=before)
    if not adm.ok:
        return RoomPrefill(adm, notice=notice)
    store = room_kv_store(room) if store is None else store
    start = time.perf_counter()
    bs, key = room.limits.block_size, model_key(lm)
    hashes = store_block_hashes(adm.token_ids, bs, adm.cache_salt)
    reusable = min(reusable_blocks(len(adm.token_ids), bs, len(hashes)), adm.hit_tokens // bs)
    inflight = inflight_for(store)
    # blocks the room counts as hits may still be computing for another prompt: wait for them (see inflight)
    # (or, on the native decoder, borrow them from that prompt's forward request and ride in its pass)
    claim = inflight.claim(key, hashes, reusable, bs, lambda hs: store.peek(key, hs), will_store=save,
                           borrow=lm.packs_batches)
    lend = None
    if lm.packs_batches and claim.loan is None and claim.keys:
        def lend(cache: object) -> None:  # the prompts waiting on us queue behind us: our pass waits for them
            scheduler_for(lm).expect(inflight.lend(claim, cache), LEND_HOLD_S)
    stored = 0
    try:
        outer = current_origin()
        with batch_origin("room" if outer.tag == "other" else outer.tag, session_id):
            cached = prefill_cached(lm, adm.token_ids, bs, cache_salt=adm.cache_salt, store=store,
                                    max_reuse_tokens=adm.hit_tokens, save=False, loan=claim.loan, on_queued=lend)
        latency = (time.perf_counter() - start) * 1000.0
        if save:
            stored = store.put(key, cached.block_hashes, cached.keys, cached.values, list(adm.token_ids), bs,
                               device=lm.device)
    finally:
        inflight.release(claim)
    compute = cached.lookup_ms + cached.forward_ms
    wait = cached.wait_ms + claim.waited_ms
    room.record_prefill(session_id, adm.prompt_no, round(compute, 3), cached.reused_tokens, wait_ms=round(wait, 3))
    return RoomPrefill(adm, cached, round(latency, 3), cached.forward_ms, cached.reused_tokens,
                       cached.computed_tokens, stored, notice, round(compute, 3), round(wait, 3))



def store_hashes_match_room(room: Room, token_ids: Sequence[int], cache_salt: str | None = None) -> bool:
    """True when the K/V store keys blocks exactly as the room's pool hashes them (same function and seed)."""
    records = room.block_records(token_ids, cache_salt)
    return [r.hash for r in records if r.full] == store_block_hashes(token_ids, room.limits.block_size, cache_salt)
