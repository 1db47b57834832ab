"""The host tier: a second K/V store beside the paged device memory, as vLLM 0.33.0's native CPU offloading
(``--kv-offloading-size``; ``vllm/v1/kv_offload/cpu/manager.py``, ``cpu/policies/lru.py`` and the
``OffloadingConnector``'s scheduler side, ``distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py``).

Write-through, one host block per device block (vLLM's default ``blocks_per_chunk`` 1): after a step, each
request's newly computed full blocks are offered to the host tier and copied there; a block already there is
only touched. At admission, the full blocks that follow a request's device prefix hit are looked up here; a
run of hits is copied back into fresh device blocks of its block table before the step's forward pass (the
copy is the cost; nothing is recomputed). Eviction is LRU over unpinned blocks; a store that cannot evict
enough is skipped whole, as vLLM's ``prepare_store`` returns None. On a CPU-only machine both tiers are host
memory: the device pool is a set of CPU tensors too.

Invariant (``check_invariants``): every host slot is free or holds exactly one block hash; between steps no
block is pinned (ref_cnt 0) and none is pending; free + held = capacity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Protocol

import torch

from kvviz.mirror.hashing import BlockHash
from kvviz.mirror.kv_events import MEDIUM_CPU, BlockRemoved, BlockStored, KVCacheEvent

GIB = 1 << 30


@dataclass
class HostBlock:
    """One host slot's block: ``ref_cnt`` -1 while its store is in flight, 0 evictable, > 0 pinned by loads."""

    slot: int
    ref_cnt: int = -1


@dataclass(frozen=True)
class StoreMeta:
    """What a host ``BlockStored`` event says of one block: its parent hash and its tokens."""

    parent: BlockHash | None
    token_ids: tuple[int, ...]


class HostBlockPool:
    """The host tier's bookkeeping, with no tensors: block hash -> slot, LRU order (oldest first), pins,
    and vLLM's KV events for the tier (``medium`` "CPU")."""

    def __init__(self, num_blocks: int, block_size: int) -> None:
        if num_blocks < 1:
            raise ValueError(f"a host tier needs at least one block, got {num_blocks}")
        self.num_blocks, self.block_size = num_blocks, block_size
        self.blocks: OrderedDict[BlockHash, HostBlock] = OrderedDict()  # least recently used first
        self._free_slots: list[int] = list(range(num_blocks - 1, -1, -1))
        self._pending_meta: dict[BlockHash, StoreMeta] = {}
        self.events: list[KVCacheEvent] = []
        self.num_stored = self.num_loaded = self.num_evicted = self.num_skipped_stores = 0

    # -- lookup and load ------------------------------------------------------------------------
    def lookup(self, hashes: Sequence[BlockHash]) -> int:
        """How many of ``hashes``, from the first, are held and ready (vLLM's ``lookup`` per key, stopping at
        the first miss)."""
        n = 0
        for h in hashes:
            b = self.blocks.get(h)
            if b is None or b.ref_cnt < 0:
                break
            n += 1
        return n

    def prepare_load(self, hashes: Sequence[BlockHash]) -> list[int]:
        """Pin held blocks for a load (not evictable until ``complete_load``); their slots, in order."""
        slots = []
        for h in hashes:
            b = self.blocks[h]
            if b.ref_cnt < 0:
                raise ValueError("a block whose store is in flight cannot be loaded")
            b.ref_cnt += 1
            slots.append(b.slot)
        self.touch(hashes)
        return slots

    def complete_load(self, hashes: Sequence[BlockHash]) -> None:
        for h in hashes:
            b = self.blocks[h]
            if b.ref_cnt <= 0:
                raise ValueError("complete_load of a block that was not pinned")
            b.ref_cnt -= 1
        self.num_loaded += len(hashes)

    def touch(self, hashes: Sequence[BlockHash]) -> None:
        """Mark held blocks most recently used, the last of ``hashes`` first: a request's head outlives its
        tail (vLLM's LRU ``touch`` walks the keys in reverse)."""
        for h in reversed(list(hashes)):
            if h in self.blocks:
                self.blocks.move_to_end(h)

    # -- store ----------------------------------------------------------------------------------
    def prepare_store(self, hashes: Sequence[BlockHash], metas: Sequence[StoreMeta]) -> list[tuple[BlockHash, int]] | None:
        """Offer a request's blocks: held ones are touched, the others get slots (evicting unpinned LRU
        blocks not in this offer). None, and nothing stored, when too few can be evicted."""
        new = [(h, m) for h, m in zip(hashes, metas, strict=True) if h not in self.blocks]
        self.touch([h for h in hashes if h in self.blocks])
        if not new:
            return []
        need = len(new) - len(self._free_slots)
        if need > 0:
            offer = set(hashes)
            victims = list(islice((h for h, b in self.blocks.items() if b.ref_cnt == 0 and h not in offer), need))
            if len(victims) < need:
                self.num_skipped_stores += 1
                return None
            for h in victims:
                self._free_slots.append(self.blocks.pop(h).slot)
            self.num_evicted += len(victims)
            self.events.append(BlockRemoved(block_hashes=list(victims), medium=MEDIUM_CPU))
        out = []
        for h, meta in new:  # insertion order = the request's order; touch below puts its head last
            slot = self._free_slots.pop()
            self.blocks[h] = HostBlock(slot)
            self._pending_meta[h] = meta
            out.append((h, slot))
        self.touch([h for h, _ in new])
        return out

    def complete_store(self, hashes: Sequence[BlockHash]) -> None:
        """The copies landed: the blocks become ready and evictable; a ``BlockStored`` (medium CPU) each."""
        metas = []
        for h in hashes:
            b = self.blocks[h]
            if b.ref_cnt != -1:
                raise ValueError("complete_store of a block that is not pending")
            b.ref_cnt = 0
            metas.append(self._pending_meta.pop(h))
        if not hashes:
            return
        self.num_stored += len(hashes)
        # one event per block with its own parent, as vLLM's offloading events (a store may skip held blocks,
        # so the stored ones need not form a chain)
        self.events.extend(BlockStored(block_hashes=[h], parent_block_hash=m.parent, token_ids=list(m.token_ids),
                                       block_size=self.block_size, medium=MEDIUM_CPU, group_idx=0)
                           for h, m in zip(hashes, metas, strict=True))

    # -- whole tier -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Drop every block (vLLM's ``reset_cache``: with the device prefix cache reset)."""
        self.blocks.clear()
        self._pending_meta.clear()
        self._free_slots = list(range(self.num_blocks - 1, -1, -1))

    def take_events(self) -> list[KVCacheEvent]:
        events, self.events = self.events, []
        return events

    @property
    def num_free(self) -> int:
        return len(self._free_slots)

    def usage(self) -> float:
        """Held blocks / capacity."""
        return len(self.blocks) / self.num_blocks

    def check_invariants(self) -> None:
        """Between steps: slots unique and within range, free + held = capacity, nothing pinned or pending."""
        slots = [b.slot for b in self.blocks.values()]
        every = slots + self._free_slots
        assert len(set(every)) == len(every) == self.num_blocks, "host slots lost or shared"
        assert all(0 <= s < self.num_blocks for s in every)
        assert all(b.ref_cnt == 0 for b in self.blocks.values()), "a host block pinned or pending between steps"
        assert not self._pending_meta


class BlockSource(Protocol):
    """What a store copies from: the paged device memory (``PagedKVMemory``)."""

    def copy_blocks_out(self, block_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]: ...


@dataclass
class HostTier:
    """The host tier: the pool's bookkeeping and the K/V it holds (CPU tensors ``[num_layers, num_blocks,
    block_size, kv_heads, head_dim]`` for K and V), and per request the next block index to offer."""

    pool: HostBlockPool
    k: torch.Tensor
    v: torch.Tensor
    next_store: dict[str, int] = field(default_factory=dict)

    @classmethod
    def sized(cls, size_bytes: int, block_size: int, num_layers: int, num_kv_heads: int, head_dim: int,
              dtype: torch.dtype) -> HostTier:
        """As many blocks as ``size_bytes`` holds (vLLM's ``cpu_bytes_to_use`` // block bytes); ValueError
        below one."""
        elem = torch.empty((), dtype=dtype).element_size()
        block_bytes = 2 * num_layers * block_size * num_kv_heads * head_dim * elem
        n = size_bytes // block_bytes
        if n < 1:
            raise ValueError(f"a host tier of {size_bytes:,} bytes holds no block of {block_bytes:,} bytes")
        shape = (num_layers, n, block_size, num_kv_heads, head_dim)
        return cls(HostBlockPool(n, block_size), torch.zeros(shape, dtype=dtype), torch.zeros(shape, dtype=dtype))

    @property
    def nbytes(self) -> int:
        return self.k.numel() * self.k.element_size() * 2

    def write(self, slots: list[int], k: torch.Tensor, v: torch.Tensor) -> None:
        """Store blocks' K, V ``[num_layers, n, block_size, kv_heads, head_dim]`` into host ``slots``."""
        ids = torch.tensor(slots, dtype=torch.long)
        self.k.index_copy_(1, ids, k.to(self.k.dtype))
        self.v.index_copy_(1, ids, v.to(self.v.dtype))

    def store(self, request_id: str, admitted: bool, num_computed: int, token_ids: Sequence[int],
              block_ids: Sequence[int], hashes: Sequence[BlockHash | None], memory: BlockSource) -> int:
        """Offer a request's full blocks computed since its last offer (all of them on admission, as vLLM
        restarts its store index there): copy the new ones out of ``memory`` into their host slots. Blocks
        held already are only touched; a store that cannot evict enough is skipped. Returns blocks copied."""
        bs = self.pool.block_size
        start = 0 if admitted else self.next_store.get(request_id, 0)
        end = min(num_computed // bs, len(block_ids))
        self.next_store[request_id] = max(start, end)
        chain = list(hashes[start:end])
        if end <= start or any(h is None for h in chain):
            return 0
        parents = [hashes[start - 1] if start else None, *chain[:-1]]
        metas = [StoreMeta(p, tuple(token_ids[(start + j) * bs:(start + j + 1) * bs])) for j, p in enumerate(parents)]
        planned = self.pool.prepare_store(chain, metas)  # type: ignore[arg-type]
        if not planned:
            return 0
        where = {h: start + j for j, h in enumerate(chain)}
        k, v = memory.copy_blocks_out([block_ids[where[h]] for h, _ in planned])
        self.write([slot for _, slot in planned], k, v)
        self.pool.complete_store([h for h, _ in planned])
        return len(planned)

    def read(self, slots: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of host ``slots``: ``[num_layers, n, block_size, kv_heads, head_dim]`` each."""
        ids = torch.tensor(slots, dtype=torch.long)
        return self.k.index_select(1, ids), self.v.index_select(1, ids)


@dataclass(frozen=True)
class LoadJob:
    """A host hit to copy back before the step's forward pass: ``hashes`` from host ``slots`` into the
    request's device blocks ``block_ids``."""

    request_id: str
    hashes: tuple[BlockHash, ...]
    slots: tuple[int, ...]
    block_ids: tuple[int, ...]


__all__ = ["GIB", "HostBlock", "HostBlockPool", "HostTier", "LoadJob", "StoreMeta"]
