"""K/V capture: a finished request's K/V read out of the paged memory through its block table, before the
engine frees its blocks (the pages that show real K/V take them from here).

vLLM 0.33.0 hands a finished request's block ids to its KV connector exactly once, before the blocks are
freed (``Scheduler._free_request`` -> ``KVConnectorBase_V1.request_finished``); kvviz's engine copies them
out at that moment for a request added with ``capture_kv`` (``LLMEngine._append_token``), so no later
request can have written into them. Invariant: the copies are the memory's own numbers (its device and
dtype, moved to the CPU), position ``p`` taken from slot ``(block_ids[p // bs], p % bs)``; the memory is
not changed.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from kvviz.engine.kv_memory import PagedKVMemory


@dataclass(frozen=True)
class CapturedKV:
    """Every layer's K and V of positions ``0..num_tokens-1``: ``[kv_heads, num_tokens, head_dim]`` each, on the
    CPU (K after rotary, as the engine stores them), and the block ids they were read from."""

    keys: list[torch.Tensor]
    values: list[torch.Tensor]
    block_ids: tuple[int, ...]

    @property
    def num_tokens(self) -> int:
        return int(self.keys[0].shape[1]) if self.keys else 0


def read_request_kv(memory: PagedKVMemory, block_ids: list[int], num_tokens: int) -> CapturedKV:
    """Copy positions ``0..num_tokens-1`` of a request out of ``memory`` through its block table."""
    bs = memory.block_size
    used = list(block_ids[:-(-num_tokens // bs)])  # the blocks that hold those positions
    if num_tokens < 1 or len(used) * bs < num_tokens or 0 in used:
        raise ValueError(f"{len(block_ids)} blocks of {bs} tokens cannot hold {num_tokens} positions")
    ids = torch.tensor(used, dtype=torch.long, device=memory.k[0].device)
    heads, dim = memory.layout.num_kv_heads, memory.layout.head_dim

    def read(t: torch.Tensor) -> torch.Tensor:  # [num_blocks, bs, kv_heads, d] -> [kv_heads, n, d] on the CPU
        rows = t.index_select(0, ids).view(-1, heads, dim)[:num_tokens]  # [n, kv_heads, d], a copy
        return rows.transpose(0, 1).contiguous().cpu()

    return CapturedKV([read(t) for t in memory.k], [read(t) for t in memory.v], tuple(used))


__all__ = ["CapturedKV", "read_request_kv"]
