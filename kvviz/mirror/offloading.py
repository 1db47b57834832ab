"""The mirror's host tier: ``kvviz.mirror.host_pool``'s ``HostBlockPool`` driven by the ``KVCacheManager``'s
steps, as vLLM 0.33.0's offloading connector drives its ``CPUOffloadingManager``. Every operation on the tier
is one ``Event`` in the manager's log (``host_load``, ``host_evict``, ``host_store``) with the tier's KV events
(medium CPU), and ``apply_host_event`` re-performs it with the same pool's rules, so a replay rebuilds the
tier exactly as it rebuilds the device pool.

A mirror step is a whole prefill or a decode append, so a load is pinned and completed at once, and a
store lands in the step that offered it. Invariant: ``HostOffload.pool`` equals the tier rebuilt from the
events (``replay``).
"""

from __future__ import annotations

from collections.abc import Sequence

from kvviz.mirror.block_pool import BlockPool
from kvviz.mirror.events import Event, EventKind, HostState, ReplayError
from kvviz.mirror.hashing import BlockHash
from kvviz.mirror.host_pool import HostBlockPool, StoreMeta, load_span, store_metas, store_span
from kvviz.mirror.kv_cache_utils import KVCacheBlock


class HostOffload:
    """A host tier of ``num_blocks`` blocks under ``block_pool`` (whose event log it writes), and per
    running request the next block index to offer."""

    def __init__(self, num_blocks: int, block_pool: BlockPool, eviction_policy: str = "lru") -> None:
        self.pool = HostBlockPool(num_blocks, block_pool.block_size, eviction_policy)
        self.block_pool = block_pool
        self.next_store: dict[str, int] = {}

    def lookup(self, hashes: Sequence[BlockHash], num_local_tokens: int, num_tokens: int) -> list[BlockHash]:
        """The hashes of the full blocks after the device hit that the tier holds, in order (never the block
        of the last prompt token)."""
        first, last = load_span(num_local_tokens, num_tokens, len(hashes), self.pool.block_size)
        if first >= last:
            return []
        return list(hashes[first:first + self.pool.lookup(hashes[first:last])])

    def load(self, request_id: str, blocks: Sequence[KVCacheBlock], hashes: Sequence[BlockHash],
             first: int) -> Event:
        """Copy held blocks ``hashes`` back into the request's fresh device ``blocks`` (logical ``first`` on)."""
        slots = self.pool.prepare_load(hashes, request_id, first)
        self.pool.complete_load(hashes)
        tokens = len(hashes) * self.pool.block_size
        return self.block_pool.emit(EventKind.HOST_LOAD, request_id, blocks, "host_load",
                                    {"count": len(hashes), "tokens": tokens, "slots": slots}, hashes=hashes,
                                    num_tokens=tokens, positions=range(first, first + len(hashes)))

    def offer(self, request_id: str, admitted: bool, blocks: Sequence[KVCacheBlock | None],
              hashes: Sequence[BlockHash], token_ids: Sequence[int]) -> None:
        """After a step: offer the request's full blocks computed since its last offer (all on admission);
        records a ``host_evict`` for the blocks dropped to make room, then the ``host_store``."""
        bs = self.pool.block_size
        start, end = store_span(admitted, self.next_store.get(request_id, 0), len(token_ids), len(blocks), bs)
        self.next_store[request_id] = max(start, end)
        offered = [(i, blocks[i]) for i in range(start, end) if blocks[i] is not None]
        if not offered:
            return
        chain = [hashes[i] for i, _ in offered]
        slot_of = {h: b.slot for h, b in self.pool.blocks.items()}
        planned = self.pool.prepare_store(chain, store_metas(hashes, token_ids, start, end, bs), request_id,
                                          offered[0][0])
        removed = self.pool.take_events()  # the eviction's BlockRemoved, if it had to evict
        victims = [h for ev in removed for h in getattr(ev, "block_hashes", ())]
        if victims:
            self.block_pool.emit(EventKind.HOST_EVICT, request_id, (), "host_evict",
                                 {"count": len(victims), "slots": [slot_of[h] for h in victims]},
                                 hashes=victims, kv_events=removed)
        device = [b for _, b in offered]
        positions = [i for i, _ in offered]
        if planned is None:
            self.block_pool.emit(EventKind.HOST_STORE, request_id, device, "host_store_skipped",  # type: ignore[arg-type]
                                 {"count": len(chain), "stored": [], "slots": []}, hashes=chain,
                                 positions=positions)
            return
        stored = [h for h, _ in planned]
        self.pool.complete_store(stored)
        where = {h: i for i, h in zip(positions, chain, strict=True)}
        code = "host_store" if stored else "host_store_held"
        self.block_pool.emit(EventKind.HOST_STORE, request_id, device, code,  # type: ignore[arg-type]
                             {"count": len(stored), "held": len(chain) - len(stored),
                              "stored": [where[h] for h in stored], "slots": [s for _, s in planned]},
                             hashes=chain, positions=positions, kv_events=self.pool.take_events())

    def forget(self, request_id: str) -> None:
        """The request finished: its offer index goes; ARC applies what it reused and stored."""
        self.next_store.pop(request_id, None)
        self.pool.finish_request(request_id)

    def reset(self) -> None:
        """With the device's ``reset_prefix_cache``: drop every host block."""
        self.pool.reset()
        self.next_store.clear()

    def state(self) -> HostState:
        return host_state(self.pool)


def host_state(pool: HostBlockPool) -> HostState:
    """The tier's snapshot; the block dropped next is the policy's own choice of one victim now."""
    order = pool.lru_order()
    victim = pool.victims(1, ())
    return HostState(pool.num_blocks, order, pool.num_stored, pool.num_loaded, pool.num_evicted,
                     pool.num_skipped_stores, len(pool.arc.t1) if pool.arc is not None else None,
                     [h for h, _ in order].index(victim[0]) if victim else None)


def apply_host_event(pool: HostBlockPool, event: Event) -> None:
    """Re-perform a recorded host-tier event (or a device reset) on ``pool`` with its own rules; ReplayError
    when the recorded outcome differs from what the rules give now."""
    kind, hashes = event.kind, list(event.block_hashes)
    try:
        rid, first = event.request_id, event.positions[0] if event.positions else 0
        if kind is EventKind.HOST_EVICT:
            pool.drop(hashes)  # type: ignore[arg-type]
        elif kind is EventKind.HOST_LOAD:
            pool.prepare_load(hashes, rid, first)  # type: ignore[arg-type]
            pool.complete_load(hashes)  # type: ignore[arg-type]
        elif kind is EventKind.HOST_STORE:
            blank = [StoreMeta(None, ())] * len(hashes)  # the published events are not rebuilt, only the tier
            planned = pool.prepare_store(hashes, blank, rid, first)  # type: ignore[arg-type]
            got = [h for h, _ in planned or ()]
            want = [hashes[event.positions.index(p)] for p in event.params.get("stored", ())]
            if got != want or (planned is None) != (event.code == "host_store_skipped"):
                raise ReplayError(f"event {event.seq}: the host tier stores {len(got)} blocks, the log says "
                                  f"{len(want)}")
            pool.complete_store(got)
        elif kind is EventKind.RESET and event.code == "reset":
            pool.reset()
        elif kind is EventKind.FREE and event.code == "free":  # the request finished
            pool.finish_request(rid)
    except (KeyError, ValueError) as exc:
        if isinstance(exc, ReplayError):
            raise
        raise ReplayError(f"event {event.seq}: {exc}") from None
    pool.take_events()


__all__ = ["HostOffload", "apply_host_event", "host_state"]
