"""vLLM's block records (``vllm/v1/core/kv_cache_utils.py``): ``KVCacheBlock`` and the LRU
``FreeKVCacheBlockQueue``. Invariant: a block has both free-queue links iff it is in the queue."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from kvviz.mirror.hashing import BlockHash


@dataclass(eq=False, slots=True)
class KVCacheBlock:
    """One physical block: id, reference count, and its hash only while it is full and cached.
    ``prev_free``/``next_free`` are links owned by ``FreeKVCacheBlockQueue``."""

    block_id: int
    ref_cnt: int = 0
    block_hash: BlockHash | None = None
    prev_free: KVCacheBlock | None = None
    next_free: KVCacheBlock | None = None
    is_null: bool = False

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
        """Remove and return the head (LRU) block; ValueError("No free blocks available") when empty."""
        first = self._head.next_free
        if first is None or first is self._tail:
            raise ValueError("No free blocks available")
        self.remove(first)
        return first

    def popleft_n(self, n: int) -> list[KVCacheBlock]:
        """Remove and return the first ``n`` blocks, head first (``n == 0`` gives [])."""
        if n > self.num_free_blocks:
            raise ValueError(f"Cannot pop {n} free blocks, only {self.num_free_blocks} free")
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
        """Put ``blocks`` at the tail in the given order (the first of them is evicted first)."""
        for block in blocks:
            self.append(block)

    def prepend_n(self, blocks: Sequence[KVCacheBlock]) -> None:
        """Put ``blocks`` at the head in the given order (``blocks[0]`` becomes the new head)."""
        for block in reversed(blocks):
            if block.prev_free is not None or block.next_free is not None:
                raise RuntimeError(f"block {block.block_id} is already in the free queue")
            first = self._head.next_free
            assert first is not None
            block.prev_free, block.next_free = self._head, first
            first.prev_free = block
            self._head.next_free = block
            self.num_free_blocks += 1

    def get_all_free_blocks(self) -> list[KVCacheBlock]:
        """Free blocks head (next to be evicted) first."""
        return list(self)
