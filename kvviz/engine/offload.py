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

The bookkeeping and every rule of the tier (which blocks are offered, looked up, evicted) live once in the
pure ``kvviz.mirror.host_pool`` (``HostBlockPool``, ``store_span``, ``load_span``), shared with the mirror the
block-table page replays; this module adds the K/V tensors and the copies.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

import torch

from kvviz.mirror.hashing import BlockHash
from kvviz.mirror.host_pool import HostBlock, HostBlockPool, StoreMeta, store_metas, store_span

GIB = 1 << 30


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

    pinned: bool = False  # page-locked host memory (the device pool is on CUDA): loads copy by DMA
    _stage: tuple[torch.Tensor, torch.Tensor] | None = None  # page-locked buffers a pinned read gathers into

    @classmethod
    def sized(cls, size_bytes: int, block_size: int, num_layers: int, num_kv_heads: int, head_dim: int,
              dtype: torch.dtype, eviction_policy: str = "lru", pin_memory: bool = False) -> HostTier:
        """As many blocks as ``size_bytes`` holds (vLLM's ``cpu_bytes_to_use`` // block bytes); ValueError
        below one. ``pin_memory`` (a CUDA device pool): the tier is page-locked, as vLLM's CPU offloading
        allocates it, so a load is one DMA copy instead of a staged one."""
        elem = torch.empty((), dtype=dtype).element_size()
        block_bytes = 2 * num_layers * block_size * num_kv_heads * head_dim * elem
        n = size_bytes // block_bytes
        if n < 1:
            raise ValueError(f"a host tier of {size_bytes:,} bytes holds no block of {block_bytes:,} bytes")
        shape = (num_layers, n, block_size, num_kv_heads, head_dim)
        return cls(HostBlockPool(n, block_size, eviction_policy), torch.zeros(shape, dtype=dtype, pin_memory=pin_memory),
                   torch.zeros(shape, dtype=dtype, pin_memory=pin_memory), pinned=pin_memory)

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
        start, end = store_span(admitted, self.next_store.get(request_id, 0), num_computed, len(block_ids), bs)
        self.next_store[request_id] = max(start, end)
        chain = list(hashes[start:end])
        if end <= start or any(h is None for h in chain):
            return 0
        metas = store_metas(hashes, token_ids, start, end, bs)  # type: ignore[arg-type]
        planned = self.pool.prepare_store(chain, metas, request_id, start)  # type: ignore[arg-type]
        if not planned:
            return 0
        where = {h: start + j for j, h in enumerate(chain)}
        k, v = memory.copy_blocks_out([block_ids[where[h]] for h, _ in planned])
        self.write([slot for _, slot in planned], k, v)
        self.pool.complete_store([h for h, _ in planned])
        return len(planned)

    def finish(self, request_id: str) -> None:
        """The request finished or was aborted: forget its offer index; ARC applies its accesses."""
        self.next_store.pop(request_id, None)
        self.pool.finish_request(request_id)

    def read(self, slots: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """K, V of host ``slots``: ``[num_layers, n, block_size, kv_heads, head_dim]`` each."""
        ids = torch.tensor(slots, dtype=torch.long)
        if not self.pinned:
            return self.k.index_select(1, ids), self.v.index_select(1, ids)
        shape = (self.k.shape[0], len(slots), *self.k.shape[2:])  # gathered into page-locked staging buffers,
        numel = self.k[:, :len(slots)].numel()  # kept and grown (flat, so each view is contiguous): one DMA each
        if self._stage is None or self._stage[0].numel() < numel:
            self._stage = (torch.empty(max(numel, 16 * self.k[:, :1].numel()), dtype=self.k.dtype, pin_memory=True),
                           torch.empty(max(numel, 16 * self.k[:, :1].numel()), dtype=self.v.dtype, pin_memory=True))
        k, v = self._stage[0][:numel].view(shape), self._stage[1][:numel].view(shape)
        torch.index_select(self.k, 1, ids, out=k)
        torch.index_select(self.v, 1, ids, out=v)
        return k, v  # valid until the next read: the caller copies them to the device at once (a blocking copy)


@dataclass(frozen=True)
class LoadJob:
    """A host hit to copy back before the step's forward pass: ``hashes`` from host ``slots`` into the
    request's device blocks ``block_ids``."""

    request_id: str
    hashes: tuple[BlockHash, ...]
    slots: tuple[int, ...]
    block_ids: tuple[int, ...]


__all__ = ["GIB", "HostBlock", "HostBlockPool", "HostTier", "LoadJob", "StoreMeta"]
