"""The block pool over physical KV-cache blocks and their LRU free queue (both in ``kv_cache_utils``),
with vLLM v1 semantics (``vllm/v1/core/block_pool.py``).

Invariants: a block is in the free queue iff its ``ref_cnt`` is 0; a block holds a hash iff it is in
the hash -> block map; a cached block keeps its hash while free and loses it only when it is popped
for reuse (an eviction). Block 0 is vLLM's null block: reserved at start-up, never allocated, never
in the free queue, not counted in usage; ``num_blocks - 1`` blocks are usable.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from kvviz.mirror.events import (
    NULL_BLOCK_ID,
    Event,
    EventKind,
    PoolCounters,
    PoolState,
    ReplayError,
    usable_blocks,
)
from kvviz.mirror.hashing import BlockHash, to_event_extra_keys
from kvviz.mirror.kv_cache_utils import FreeKVCacheBlockQueue, KVCacheBlock
from kvviz.mirror.kv_events import (
    SPEC_FULL_ATTENTION,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    KVCacheEvent,
)


class BlockPool:
    """``num_blocks`` blocks (block 0 the null block), the free queue and the hash -> block map.

    Every state change appends an ``Event`` (a reason code and its parameters) to ``events``, shared
    with the manager when one is given; events that change the prefix cache also carry vLLM's KV-cache
    events (``BlockStored``, ``BlockRemoved``, ``AllBlocksCleared``). As in vLLM, identical blocks are
    not de-duplicated: two blocks may carry the same hash, and a lookup returns the first one cached.
    ``apply`` re-performs a recorded event, so a replay runs these same rules.
    """

    def __init__(self, num_blocks: int, events: list[Event] | None = None, block_size: int = 16, *,
                 kv_cache_spec_kind: str = SPEC_FULL_ATTENTION, sliding_window: int | None = None) -> None:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 2:
            raise ValueError(f"num_blocks must be an integer >= 2 (block 0 is the null block), got {num_blocks!r}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        # vLLM: the first block popped at start-up becomes the null block, used as a placeholder.
        self.null_block = self.free_block_queue.popleft()
        self.null_block.is_null = True
        self.cached_block_hash_to_block: dict[BlockHash, dict[int, KVCacheBlock]] = {}
        self.events: list[Event] = events if events is not None else []
        self.num_events_dropped = 0  # events dropped from the log's head (a long-running engine bounds it)
        self.num_evictions = 0
        # The one KV-cache group's spec, stamped on BlockStored as vLLM's KVCacheManager.take_events does.
        self.kv_cache_spec_kind = kv_cache_spec_kind
        self.sliding_window = sliding_window

    # -- events -------------------------------------------------------------------------------
    def emit(
        self,
        kind: EventKind,
        request_id: str,
        blocks: Sequence[KVCacheBlock] = (),
        code: str = "",
        params: dict[str, Any] | None = None,
        *,
        hashes: Sequence[BlockHash | None] | None = None,
        num_tokens: int = 0,
        positions: Sequence[int] = (),
        kv_events: Sequence[KVCacheEvent] = (),
    ) -> Event:
        """Append one event to the log and return it (``code`` defaults to the kind's name)."""
        event = Event(
            seq=self.num_events_dropped + len(self.events),
            kind=kind,
            request_id=request_id,
            block_ids=tuple(b.block_id for b in blocks),
            block_hashes=tuple(hashes) if hashes is not None else tuple(b.block_hash for b in blocks),
            code=code or kind.value,
            params=dict(params or {}),
            num_tokens=num_tokens,
            positions=tuple(positions),
            kv_events=tuple(kv_events),
        )
        self.events.append(event)
        return event

    def drop_oldest_events(self, n: int) -> None:
        """Forget the first ``n`` events of the log (seq numbers keep counting); a log cut this way no longer
        replays from an empty pool, so only a long-running engine that published them does this."""
        n = max(0, min(n, len(self.events)))
        del self.events[:n]
        self.num_events_dropped += n

    # -- queries ------------------------------------------------------------------------------
    @property
    def num_usable_blocks(self) -> int:
        """Blocks that can ever be allocated: all but the null block."""
        return usable_blocks(self.num_blocks)

    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Share of usable blocks in use (ref_cnt > 0); the null block is not counted (vLLM)."""
        return 1.0 - self.get_num_free_blocks() / self.num_usable_blocks

    def get_cached_block(self, block_hash: BlockHash) -> KVCacheBlock | None:
        """The first block cached under ``block_hash``, or None (a miss)."""
        blocks = self.cached_block_hash_to_block.get(block_hash)
        return next(iter(blocks.values())) if blocks else None

    # -- state changes ------------------------------------------------------------------------
    def get_new_blocks(
        self,
        num_blocks: int,
        request_id: str = "",
        *,
        positions: Sequence[int] = (),
        num_tokens: int = 0,
    ) -> list[KVCacheBlock]:
        """Pop ``num_blocks`` blocks from the head of the free queue, evicting any that still hold a
        hash, and give each ref_cnt 1. ValueError (and no change) when too few are free."""
        if num_blocks > self.get_num_free_blocks():
            raise ValueError(f"Cannot get {num_blocks} free blocks from the pool")
        popped = self.free_block_queue.popleft_n(num_blocks)
        self._take_blocks(popped, request_id, positions, num_tokens)
        return popped

    def _take_blocks(self, popped: Sequence[KVCacheBlock], request_id: str, positions: Sequence[int],
                     num_tokens: int) -> None:
        evicted = [b for b in popped if b.block_hash is not None]
        if evicted:
            # vLLM: one BlockRemoved per evicted hash, with its group (kvviz has one group, 0).
            removed = [BlockRemoved(block_hashes=[b.block_hash], group_idx=0)  # type: ignore[list-item]
                       for b in evicted]
            self.emit(EventKind.EVICT, request_id, evicted, kv_events=removed)
            for block in evicted:
                self._maybe_evict_cached_block(block)
        for block in popped:
            assert block.ref_cnt == 0 and block.block_hash is None
            block.ref_cnt = 1
        code = "allocate" if popped else "allocate_none"
        self.emit(EventKind.ALLOCATE, request_id, popped, code, {"count": len(popped), "tokens": num_tokens},
                  num_tokens=num_tokens, positions=positions or range(len(popped)))

    def cached_hash_counts(self) -> dict[BlockHash, int]:
        """Each cached hash -> how many blocks hold it (a prefix computed twice before either copy was
        cached is held twice; a BlockRemoved takes away one copy)."""
        return {h: len(blocks) for h, blocks in self.cached_block_hash_to_block.items()}

    def _maybe_evict_cached_block(self, block: KVCacheBlock) -> bool:
        """Drop ``block``'s hash and its entry in the hash map; False when it held none."""
        if block.block_hash is None:
            return False
        cached = self.cached_block_hash_to_block.get(block.block_hash)
        if cached is not None and cached.pop(block.block_id, None) is not None and not cached:
            del self.cached_block_hash_to_block[block.block_hash]
        block.block_hash = None
        self.num_evictions += 1
        return True

    def touch(self, blocks: Sequence[KVCacheBlock], request_id: str = "", *,
              positions: Sequence[int] = ()) -> None:
        """A cache hit: ref_cnt + 1 for each block; one at ref_cnt 0 leaves the free queue."""
        if not blocks:
            return
        for block in blocks:
            if block.ref_cnt == 0 and not block.is_null:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
        self.emit(EventKind.TOUCH, request_id, blocks, positions=positions or range(len(blocks)))

    def cache_full_blocks(
        self,
        blocks: Sequence[KVCacheBlock | None],
        block_hashes: Sequence[BlockHash],
        num_cached_blocks: int,
        num_full_blocks: int,
        request_id: str = "",
        *,
        token_ids: Sequence[int] = (),
        extra_keys: Sequence[tuple[Any, ...] | None] | None = None,
    ) -> list[KVCacheBlock]:
        """Give ``blocks[num_cached_blocks:num_full_blocks]`` their hashes and enter them in the map;
        emits vLLM's ``BlockStored`` (``token_ids`` = the request's tokens, to slice the stored span;
        ``extra_keys`` = each block's tagged hash keys, published untagged).
        Null (None) entries and blocks already holding a hash (cache hits) are skipped."""
        if num_cached_blocks >= num_full_blocks:
            return []
        if len(block_hashes) < num_full_blocks:
            raise ValueError(f"need {num_full_blocks} block hashes, got {len(block_hashes)}")
        cached: list[KVCacheBlock] = []
        positions: list[int] = []
        for i in range(num_cached_blocks, num_full_blocks):
            block = blocks[i]
            if block is None or block.is_null or block.block_hash is not None:
                continue
            h = block_hashes[i]
            block.block_hash = h
            self.cached_block_hash_to_block.setdefault(h, {})[block.block_id] = block
            cached.append(block)
            positions.append(i)
        if cached:
            bs = self.block_size
            stored = BlockStored(
                block_hashes=[block_hashes[i] for i in positions],
                parent_block_hash=block_hashes[positions[0] - 1] if positions[0] > 0 else None,
                token_ids=[t for i in positions for t in token_ids[i * bs:(i + 1) * bs]],
                block_size=bs,
                extra_keys=to_event_extra_keys([extra_keys[i] for i in positions]) if extra_keys is not None
                else None,
                group_idx=0,
                kv_cache_spec_kind=self.kv_cache_spec_kind,
                kv_cache_spec_sliding_window=self.sliding_window,
            )
            self.emit(EventKind.CACHE, request_id, cached, positions=positions, kv_events=(stored,))
        return cached

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock], request_id: str = "", *,
                    positions: Sequence[int] = (), code: str = "free") -> None:
        """ref_cnt - 1 for each block, given in eviction order (callers pass a request's blocks tail
        first). Of those reaching 0, blocks without a hash go to the free-queue head (they can never
        be hit, so they are spent first) and blocks with a hash to the tail (vLLM's ``free_blocks``)."""
        blocks = list(ordered_blocks)
        if not blocks:
            return
        for block in blocks:
            if block.ref_cnt <= 0:
                raise RuntimeError(f"block {block.block_id} freed with ref_cnt {block.ref_cnt}")
        without_hash: list[KVCacheBlock] = []
        with_hash: list[KVCacheBlock] = []
        for block in blocks:
            block.ref_cnt -= 1
            if block.ref_cnt == 0 and not block.is_null:
                (without_hash if block.block_hash is None else with_hash).append(block)
        self.free_block_queue.prepend_n(without_hash)
        self.free_block_queue.append_n(with_hash)
        self.emit(EventKind.FREE, request_id, blocks, code,
                  {"to_head": [b.block_id for b in without_hash], "to_tail": [b.block_id for b in with_hash]},
                  positions=positions or range(len(blocks)))

    def reset_prefix_cache(self) -> bool:
        """Drop every hash so nothing can hit any more (vLLM: after a weight update, or between
        benchmark runs). Refused (False, nothing changed) while any block is in use."""
        in_use = self.num_usable_blocks - self.get_num_free_blocks()
        if in_use:
            self.emit(EventKind.RESET, "", (), "reset_refused", {"in_use": in_use})
            return False
        self.emit(EventKind.RESET, "", (), "reset", {"dropped": sum(len(d) for d in
                  self.cached_block_hash_to_block.values())}, kv_events=(AllBlocksCleared(),))
        self.cached_block_hash_to_block = {}
        for block in self.blocks:
            block.block_hash = None
        return True

    # -- replay -------------------------------------------------------------------------------
    def apply(self, event: Event) -> None:
        """Re-perform a recorded event with this pool's own rules (replay). ValueError (ReplayError)
        when the event does not fit the current state."""
        blocks = [self.blocks[b] for b in event.block_ids] if all(
            0 < b < self.num_blocks for b in event.block_ids) else None
        if blocks is None:
            raise ReplayError(f"event {event.seq}: block ids out of range: {event.block_ids}")
        rid, kind = event.request_id, event.kind
        if kind is EventKind.EVICT:
            for block in blocks:
                if block.block_hash is None or block.ref_cnt != 0:
                    raise ReplayError(f"event {event.seq}: block {block.block_id} is not a cached free block")
        elif kind is EventKind.ALLOCATE:
            head = [b.block_id for b in self.free_block_queue][: len(blocks)]
            if head != list(event.block_ids):
                raise ReplayError(f"event {event.seq}: blocks {list(event.block_ids)} are not the free-queue "
                                  f"head {head}")
            popped = self.free_block_queue.popleft_n(len(blocks))
            for block in popped:
                if block.block_hash is not None:  # the evict event before this one dropped them
                    raise ReplayError(f"event {event.seq}: block {block.block_id} still holds a hash")
                block.ref_cnt = 1
            self.emit(kind, rid, popped, event.code, event.params, num_tokens=event.num_tokens,
                      positions=event.positions)
            return
        elif kind is EventKind.CACHE:
            for block, h in zip(blocks, event.block_hashes, strict=True):
                if h is None or block.block_hash is not None:
                    raise ReplayError(f"event {event.seq}: block {block.block_id} cannot be cached")
                block.block_hash = h
                self.cached_block_hash_to_block.setdefault(h, {})[block.block_id] = block
        elif kind is EventKind.TOUCH:
            self.touch(blocks, rid, positions=event.positions)
            return
        elif kind is EventKind.FREE:
            if any(b.ref_cnt <= 0 for b in blocks):
                raise ReplayError(f"event {event.seq}: a block is freed more often than used")
            self.free_blocks(blocks, rid, positions=event.positions, code=event.code)
            return
        elif kind is EventKind.RESET:
            self.reset_prefix_cache()
            return
        if kind is EventKind.EVICT:
            for block in blocks:
                self._maybe_evict_cached_block(block)
        self.events.append(event)

    # -- views --------------------------------------------------------------------------------
    def snapshot(self) -> PoolState:
        """The pool's state (no request tables: the manager adds those)."""
        return PoolState(
            num_blocks=self.num_blocks,
            block_size=self.block_size,
            ref_cnt=tuple(b.ref_cnt for b in self.blocks),
            block_hash=tuple(b.block_hash for b in self.blocks),
            free_queue=tuple(b.block_id for b in self.free_block_queue),
            hash_to_blocks={h: tuple(d) for h, d in self.cached_block_hash_to_block.items()},
            counters=PoolCounters(evictions=self.num_evictions),
            num_events=len(self.events),
        )

    def check_invariants(self) -> None:
        """Raise AssertionError if any pool invariant is broken (used by tests)."""
        in_queue = {b.block_id for b in self.free_block_queue}
        assert len(in_queue) == self.free_block_queue.num_free_blocks
        assert self.null_block.block_id == NULL_BLOCK_ID and NULL_BLOCK_ID not in in_queue
        assert self.null_block.block_hash is None and self.null_block.ref_cnt == 0
        for block in self.blocks[1:]:
            assert block.ref_cnt >= 0, block
            assert (block.ref_cnt == 0) == (block.block_id in in_queue), block
            if block.block_hash is not None:
                assert block.block_id in self.cached_block_hash_to_block.get(block.block_hash, {}), block
        for h, blocks in self.cached_block_hash_to_block.items():
            assert blocks, h
            for bid, block in blocks.items():
                assert block.block_id == bid and block.block_hash == h, (h, bid)
