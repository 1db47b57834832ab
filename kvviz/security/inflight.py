"""Blocks being computed right now, per K/V store: a room prompt whose reusable prefix another prompt is
still computing waits for that prompt to store it, instead of computing the same blocks again in the
same forward pass.

Why: the room's pool caches a prompt's full blocks when it admits the prompt, but their K/V land in the
store only after the forward pass. Thirty attendees who press Send together with the same system prompt
would otherwise all compute it. SGLang's scheduler makes the same trade (``schedule_policy.py``, "in-batch
prefix caching": a waiting request that shares at least 32 tokens with another waiting request's uncached
prefix is deprioritised until that one is cached). kvviz waits when at least ``MIN_SHARED_TOKENS`` of the
prompt's reusable prefix are claimed by a prompt in flight.

With the native decoder kvviz goes one step further, as xLLM's "in-batch prefix cache" does
(xLLM-AI/xllm pull request 1743): once the owner's forward request is queued, it lends the cache that
request fills, and a waiter stops waiting, queues right behind it and borrows the prefix: in the owner's
pass, each layer copies the owner's fresh K/V of those positions (``kvviz.model.packing``); in a later
pass, it takes the finished ones. A cold room's first wave then costs one pass instead of two.

Invariants: only a prompt that has stopped waiting claims blocks, so a waiter never waits on another
waiter (no cycles); a prompt that borrows never lends (no chains); every claim is released once, when
its owner stored the blocks or failed; a wait never exceeds ``MAX_WAIT_S`` in all.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kvviz.model.kvstore import Loan

#: Shared tokens that make waiting worth it (SGLang's IN_BATCH_PREFIX_CACHING_DEPRIORITIZE_THRESHOLD).
MIN_SHARED_TOKENS = 32
#: Longest total wait for other prompts' blocks; then the prompt computes them itself.
MAX_WAIT_S = 10.0


@dataclass
class Claim:
    """Blocks one prompt computes and will store; ``done`` is set when they are stored (or it failed).
    ``lender``: the cache its forward request fills, once that request is queued (``lend``); ``loan``:
    what this prompt borrows from another's instead of waiting."""

    keys: list[tuple[str, bytes]]
    done: threading.Event = field(default_factory=threading.Event)
    waited_ms: float = 0.0
    lender: Any = None
    loan: Loan | None = None
    waiters: int = 0  # prompts waiting on this claim right now


class InflightBlocks:
    """The claims of the prompts computing on one K/V store, keyed by (model key, block hash)."""

    def __init__(self, min_shared_tokens: int = MIN_SHARED_TOKENS, max_wait_s: float = MAX_WAIT_S) -> None:
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # a claim was released or lent
        self._claims: dict[tuple[str, bytes], Claim] = {}
        self.min_shared_tokens = min_shared_tokens
        self.max_wait_s = max_wait_s

    def claim(self, model_key: str, block_hashes: Sequence[bytes], reusable_blocks: int, block_size: int,
              stored_blocks: Callable[[Sequence[bytes]], int], *, will_store: bool = True,
              borrow: bool = False) -> Claim:
        """Wait while another prompt computes at least ``min_shared_tokens`` of the first
        ``reusable_blocks`` blocks that are not stored yet, then claim every full block this prompt will
        store that nobody else claims (none unless ``will_store``). ``stored_blocks(hashes)`` counts the
        leading stored blocks. With ``borrow``, once that prompt's forward request is queued (it lent its
        cache) this prompt stops waiting and borrows the prefix it computes (``Claim.loan``): queued
        behind it, it rides in the same pass or a later one.
        Release the returned claim with :meth:`release` in a ``finally``."""
        start = time.perf_counter()
        deadline = start + self.max_wait_s
        with self._changed:
            while True:
                have = stored_blocks(block_hashes[:reusable_blocks]) if reusable_blocks > 0 else 0
                owner, run = self._pending_owner(model_key, block_hashes[have:reusable_blocks], block_size)
                lendable = borrow and owner is not None and owner.lender is not None
                if owner is None or lendable or time.perf_counter() >= deadline:
                    new = block_hashes[stored_blocks(block_hashes):] if will_store else []
                    keys = [(model_key, h) for h in new if (model_key, h) not in self._claims]
                    mine = Claim(keys, waited_ms=(time.perf_counter() - start) * 1000.0)
                    if lendable:
                        mine.loan = Loan(owner.lender, (have + run) * block_size)
                    for key in keys:
                        self._claims[key] = mine
                    return mine
                owner.waiters += 1
                try:
                    self._changed.wait(max(0.0, deadline - time.perf_counter()))
                finally:
                    owner.waiters -= 1

    def lend(self, claim: Claim, cache: Any) -> int:
        """``claim``'s prompt has queued its forward request, which fills ``cache``: waiters may borrow.
        Returns how many prompts wait on it (they are about to queue behind it)."""
        with self._changed:
            claim.lender = cache
            self._changed.notify_all()
            return claim.waiters

    def release(self, claim: Claim) -> None:
        """Drop ``claim`` (its blocks are stored, or its prompt failed) and wake whoever waits on it."""
        with self._changed:
            for key in claim.keys:
                if self._claims.get(key) is claim:
                    del self._claims[key]
            claim.done.set()
            self._changed.notify_all()

    def pending(self) -> int:
        """Blocks claimed right now."""
        with self._lock:
            return len(self._claims)

    def _pending_owner(self, model_key: str, missing: Sequence[bytes], block_size: int) -> tuple[Claim | None, int]:
        """The claim computing the first missing block, if the run of missing blocks it (and others)
        compute covers at least ``min_shared_tokens`` tokens; and how many leading missing blocks that
        claim computes itself."""
        run = own = 0
        first: Claim | None = None
        for h in missing:
            claim = self._claims.get((model_key, h))
            if claim is None:
                break
            first = first or claim
            if claim is first and own == run:  # still the first claim's unbroken run
                own += 1
            run += 1
        return (first, own) if first is not None and run * block_size >= self.min_shared_tokens else (None, 0)


_REGISTRY: weakref.WeakKeyDictionary[object, InflightBlocks] = weakref.WeakKeyDictionary()
_REGISTRY_LOCK = threading.Lock()


def inflight_for(store: object) -> InflightBlocks:
    """The in-flight claims of ``store`` (one per store and process, dropped with the store)."""
    with _REGISTRY_LOCK:
        found = _REGISTRY.get(store)
        if found is None:
            found = _REGISTRY[store] = InflightBlocks()
        return found
