"""PagedKVMemory: the engine's K/V, one preallocated K and V tensor per layer, cut into blocks.

Shapes: ``k[layer]``, ``v[layer]`` are ``[num_blocks, block_size, num_kv_heads, head_dim]`` on the model's
device and dtype. Token position ``p`` of a request lives in slot ``(block_table[p // bs], p % bs)``, flat
slot ``block_id * bs + p % bs``. Block 0 is the null block: never written by a request, it pads block tables (its keys are masked).
Invariant: this is the only K/V store; a block's K/V change only when a request that holds it writes.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch

from kvviz.mirror.manager import MAX_NUM_BLOCKS

log = logging.getLogger("kvviz.engine")


@dataclass(frozen=True)
class KVLayout:
    """The per-token K/V shape of a model: layers, K/V heads, head_dim, bytes per value."""

    num_layers: int
    num_kv_heads: int
    head_dim: int
    element_size: int

    @property
    def bytes_per_token(self) -> int:
        """K and V of one token over all layers: 2 x layers x kv_heads x head_dim x element size."""
        return 2 * self.num_layers * self.num_kv_heads * self.head_dim * self.element_size


def num_blocks_for(budget_bytes: int, block_size: int, layout: KVLayout) -> int:
    """Blocks that fit the budget (null block included), at most the manager's limit; ValueError below 2."""
    n = min(budget_bytes // (block_size * layout.bytes_per_token), MAX_NUM_BLOCKS)
    if n < 2:
        raise ValueError(f"a K/V budget of {budget_bytes:,} bytes holds {n} blocks of {block_size} tokens "
                         f"({block_size * layout.bytes_per_token:,} bytes each); at least 2 are needed")
    return n


class PagedKVMemory:
    """K and V blocks of every layer; ``write`` fills slots; the runner reads whole blocks through block tables."""

    def __init__(self, num_blocks: int, block_size: int, layout: KVLayout, device: torch.device,
                 dtype: torch.dtype) -> None:
        self.num_blocks, self.block_size, self.layout = num_blocks, block_size, layout
        shape = (num_blocks, block_size, layout.num_kv_heads, layout.head_dim)
        # zeros, not empty: the null block pads block tables and must hold finite numbers (masked, x 0)
        self.k = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(layout.num_layers)]
        self.v = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(layout.num_layers)]
        flat = (num_blocks * block_size, layout.num_kv_heads, layout.head_dim)
        self._k_flat = [t.view(flat) for t in self.k]
        self._v_flat = [t.view(flat) for t in self.v]
        log.info("KV cache size: %s tokens (%d blocks of %d tokens, block 0 the null block; %.1f MiB)",
                 f"{(num_blocks - 1) * block_size:,}", num_blocks, block_size, self.nbytes / 2**20)

    @property
    def nbytes(self) -> int:
        """Bytes of every K and V tensor, measured from the tensors."""
        return sum(t.numel() * t.element_size() for t in (*self.k, *self.v))

    @property
    def block_bytes(self) -> int:
        """Bytes of one block over all layers, K and V."""
        return self.nbytes // self.num_blocks

    def write(self, layer: int, slots: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> None:
        """Store ``k``, ``v`` ``[T, kv_heads, head_dim]`` at flat ``slots`` ``[T]``."""
        self._k_flat[layer].index_copy_(0, slots, k)
        self._v_flat[layer].index_copy_(0, slots, v)

    def block(self, block_id: int) -> tuple[torch.Tensor, torch.Tensor]:
        """K and V of one physical block over all layers: ``[num_layers, block_size, kv_heads, head_dim]``."""
        return (torch.stack([t[block_id] for t in self.k]).cpu(), torch.stack([t[block_id] for t in self.v]).cpu())


    def copy_blocks_out(self, block_ids: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
        """Copies of whole blocks' K and V over all layers, on the CPU: ``[num_layers, n, block_size, kv_heads,
        head_dim]`` each (what a host tier keeps; the blocks themselves are not changed)."""
        ids = torch.tensor(block_ids, dtype=torch.long, device=self.k[0].device)
        k = torch.stack([t.index_select(0, ids) for t in self.k]).cpu()
        v = torch.stack([t.index_select(0, ids) for t in self.v]).cpu()
        return k, v

    def copy_blocks_in(self, block_ids: list[int], k: torch.Tensor, v: torch.Tensor) -> None:
        """Overwrite whole blocks with ``k``, ``v`` ``[num_layers, n, block_size, kv_heads, head_dim]`` (a host
        tier's copy loaded back): block ``block_ids[i]`` of every layer gets row ``i``."""
        device, dtype = self.k[0].device, self.k[0].dtype
        ids = torch.tensor(block_ids, dtype=torch.long, device=device)
        k, v = k.to(device, dtype), v.to(device, dtype)  # one transfer each, not one per layer
        for layer, (kt, vt) in enumerate(zip(self.k, self.v, strict=True)):
            kt.index_copy_(0, ids, k[layer])
            vt.index_copy_(0, ids, v[layer])
