"""Physical KV-cache blocks, the LRU free queue and the block pool, with vLLM v1 semantics
(``vllm/v1/core/block_pool.py`` and ``kv_cache_utils.py``).

Invariants: a block is in the free queue iff its ``ref_cnt`` is 0; a block holds a hash iff it is in
the hash -> block map; a cached block keeps its hash while free and loses it only when it is popped
for reuse (an eviction). Unlike vLLM there is no reserved null block: all ``num_blocks`` are usable.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from kvviz.core.events import Event, EventKind, PoolCounters, PoolState
from kvviz.text import core as text


@dataclass(eq=False, slots=True)
class KVCacheBlock:
    """One physical block: id, reference count, and its hash only while it is full and cached.
    ``prev_free``/``next_free`` are links owned by ``FreeKVCacheBlockQueue``."""

    block_id: int
    ref_cnt: int = 0
    block_hash: bytes | None = None
    prev_free: KVCacheBlock | None = None
    next_free: KVCacheBlock | None = None

    def __repr__(self) -> str:
        h = self.block_hash.hex()[:8] if self.block_hash else None
        return f"KVCacheBlock(block_id={self.block_id}, ref_cnt={self.ref_cnt}, block_hash={h})"


class FreeKVCacheBlockQueue:
    """Doubly linked list of free blocks in eviction order: the head is the least recently used
    block (popped first), the tail the most recent. ``remove`` is O(1), so a hit can pull a cached
    block out of the middle. Starts ordered by block id."""

    def __init__(self, blocks: Sequence[KVCacheBlock]) -> None:
        self._head = KVCacheBlock(-1)  # sentinels: never popped, so every real block has both links
        self._tail = KVCacheBlock(-1)
        self._head.next_free = self._tail
        self._tail.prev_free = self._head
        self.num_free_blocks = 0
        self.append_n(blocks)

    def __len__(self) -> int:
        return self.num_free_blocks

    def __iter__(self) -> Iterator[KVCacheBlock]:
        node = self._head.next_free
        while node is not None and node is not self._tail:
            yield node
            node = node.next_free

    def popleft(self) -> KVCacheBlock:
        """Remove and return the head (LRU) block."""
        first = self._head.next_free
        if first is None or first is self._tail:
            raise ValueError("no free blocks")
        self.remove(first)
        return first

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the first ``n`` blocks, head first."""
        if n > self.num_free_blocks:
            raise ValueError(f"cannot pop {n} blocks, only {self.num_free_blocks} free")
        return [self.popleft() for _ in range(n)]

    def remove(self, block: KVCacheBlock) -> None:
        """Unlink ``block`` from anywhere in the queue in O(1)."""
        prev, nxt = block.prev_free, block.next_free
        if prev is None or nxt is None:
            raise RuntimeError(f"block {block.block_id} is not in the free queue")
        prev.next_free = nxt
        nxt.prev_free = prev
        block.prev_free = block.next_free = None
        self.num_free_blocks -= 1

    def append(self, block: KVCacheBlock) -> None:
        """Put ``block`` at the tail (evicted last)."""
        if block.prev_free is not None or block.next_free is not None:
            raise RuntimeError(f"block {block.block_id} is already in the free queue")
        last = self._tail.prev_free
        assert last is not None
        last.next_free = block
        block.prev_free = last
        block.next_free = self._tail
        self._tail.prev_free = block
        self.num_free_blocks += 1

    def append_n(self, blocks: Iterable[KVCacheBlock]) -> None:
        for block in blocks:
            self.append(block)

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Free blocks head (next to be evicted) first."""
        return list(self)


class BlockPool:
    """``num_blocks`` blocks, the free queue and the hash -> block map. Every state change appends an
    ``Event`` to ``events`` (shared with the manager when one is given).

    As in vLLM, identical blocks are not de-duplicated: two blocks may carry the same hash (block
    tables stay append-only), and a lookup returns the first one cached.
    """

    def __init__(self, num_blocks: int, events: list[Event] | None = None, block_size: int = 16) -> None:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
            raise ValueError(f"num_blocks must be a positive integer, got {num_blocks!r}")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.blocks = [KVCacheBlock(i) for i in range(num_blocks)]
        self.free_block_queue = FreeKVCacheBlockQueue(self.blocks)
        self.cached_block_hash_to_block: dict[bytes, dict[int, KVCacheBlock]] = {}
        self.events: list[Event] = events if events is not None else []
        self.num_evictions = 0

    # -- events -------------------------------------------------------------------------------
    def emit(
        self,
        kind: EventKind,
        request_id: str,
        blocks: Sequence[KVCacheBlock] = (),
        reason: str = "",
        *,
        hashes: Sequence[bytes | None] | None = None,
        num_tokens: int = 0,
        positions: Sequence[int] = (),
    ) -> Event:
        """Append one event to the log and return it."""
        event = Event(
            seq=len(self.events),
            kind=kind,
            request_id=request_id,
            block_ids=tuple(b.block_id for b in blocks),
            block_hashes=tuple(hashes) if hashes is not None else tuple(b.block_hash for b in blocks),
            reason=reason,
            num_tokens=num_tokens,
            positions=tuple(positions),
        )
        self.events.append(event)
        return event

    # -- queries ------------------------------------------------------------------------------
    def get_num_free_blocks(self) -> int:
        return self.free_block_queue.num_free_blocks

    def get_usage(self) -> float:
        """Share of blocks in use (ref_cnt > 0)."""
        return 1.0 - self.get_num_free_blocks() / self.num_blocks

    def get_cached_block(self, block_hash: bytes) -> KVCacheBlock | None:
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
            raise ValueError(f"cannot get {num_blocks} free blocks, only {self.get_num_free_blocks()} free")
        popped = self.free_block_queue.popleft_n(num_blocks)
        evicted = [b for b in popped if b.block_hash is not None]
        if evicted:
            self.emit(EventKind.EVICT, request_id, evicted, text.EVENT_EVICT)
            for block in evicted:
                self._maybe_evict_cached_block(block)
        for block in popped:
            assert block.ref_cnt == 0 and block.block_hash is None
            block.ref_cnt = 1
        if popped:
            reason = text.EVENT_ALLOCATE.format(count=len(popped), tokens=num_tokens)
        else:
            reason = text.EVENT_ALLOCATE_NONE.format(tokens=num_tokens)
        self.emit(EventKind.ALLOCATE, request_id, popped, reason, num_tokens=num_tokens,
                  positions=positions or range(len(popped)))
        return popped

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
            if block.ref_cnt == 0:
                self.free_block_queue.remove(block)
            block.ref_cnt += 1
        self.emit(EventKind.TOUCH, request_id, blocks, text.EVENT_TOUCH,
                  positions=positions or range(len(blocks)))

    def cache_full_blocks(
        self,
        blocks: Sequence[KVCacheBlock | None],
        block_hashes: Sequence[bytes],
        num_cached_blocks: int,
        num_full_blocks: int,
        request_id: str = "",
    ) -> list[KVCacheBlock]:
        """Give ``blocks[num_cached_blocks:num_full_blocks]`` their hashes and enter them in the map.
        Null (None) entries and blocks already holding a hash (cache hits) are skipped."""
        if num_cached_blocks >= num_full_blocks:
            return []
        if len(block_hashes) < num_full_blocks:
            raise ValueError(f"need {num_full_blocks} block hashes, got {len(block_hashes)}")
        cached: list[KVCacheBlock] = []
        positions: list[int] = []
        for i in range(num_cached_blocks, num_full_blocks):
            block = blocks[i]
            if block is None or block.block_hash is not None:
                continue
            h = block_hashes[i]
            block.block_hash = h
            self.cached_block_hash_to_block.setdefault(h, {})[block.block_id] = block
            cached.append(block)
            positions.append(i)
        if cached:
            self.emit(EventKind.CACHE, request_id, cached, text.EVENT_CACHE, positions=positions)
        return cached

    def free_blocks(self, ordered_blocks: Iterable[KVCacheBlock], request_id: str = "", *,
                    positions: Sequence[int] = (), reason: str = text.EVENT_FREE) -> None:
        """ref_cnt - 1 for each block; those at 0 go to the free-queue tail in the given order, so
        the first is evicted first. Callers pass a request's blocks in reverse (tail first)."""
        blocks = list(ordered_blocks)
        if not blocks:
            return
        for block in blocks:
            if block.ref_cnt <= 0:
                raise RuntimeError(f"block {block.block_id} freed with ref_cnt {block.ref_cnt}")
            block.ref_cnt -= 1
        self.free_block_queue.append_n(b for b in blocks if b.ref_cnt == 0)
        self.emit(EventKind.FREE, request_id, blocks, reason, positions=positions or range(len(blocks)))

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
        for block in self.blocks:
            assert block.ref_cnt >= 0, block
            assert (block.ref_cnt == 0) == (block.block_id in in_queue), block
            if block.block_hash is not None:
                assert block.block_id in self.cached_block_hash_to_block.get(block.block_hash, {}), block
        for h, blocks in self.cached_block_hash_to_block.items():
            assert blocks, h
            for bid, block in blocks.items():
                assert block.block_id == bid and block.block_hash == h, (h, bid)
