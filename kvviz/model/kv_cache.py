"""The native decoder's KV cache: per-layer K and V of the positions computed so far, in the layout of
transformers' DynamicCache (kvviz.model.prefill's passes; the engine keeps its own paged memory).

Invariant: a cache grows by replacing its tensors with new ones, so tensors handed to it (a reused
prefix) are never modified; its K are post-rotary, exactly what an engine stores.
"""

from __future__ import annotations

import torch


class KVCacheLayer:
    """One layer's cached K and V, ``[batch, kv_heads, tokens, head_dim]`` (None until first use)."""

    def __init__(self, keys: torch.Tensor | None = None, values: torch.Tensor | None = None) -> None:
        self.keys = keys
        self.values = values

    def update(self, keys: torch.Tensor, values: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Append new positions (a new tensor: earlier ones are never written to); the whole K, V."""
        if self.keys is None or self.values is None:
            self.keys, self.values = keys, values
        else:
            self.keys = torch.cat((self.keys, keys), dim=-2)
            self.values = torch.cat((self.values, values), dim=-2)
        return self.keys, self.values


class KVCache:
    """Per-layer K/V of the positions computed so far (the layout of transformers' DynamicCache)."""

    def __init__(self, num_layers: int, data: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> None:
        if data is not None and len(data) != num_layers:
            raise ValueError(f"{len(data)} layers of K/V for a {num_layers}-layer model")
        self.layers = [KVCacheLayer(*pair) for pair in data] if data else [KVCacheLayer() for _ in range(num_layers)]

    def get_seq_length(self) -> int:
        keys = self.layers[0].keys if self.layers else None
        return 0 if keys is None else int(keys.shape[-2])


__all__ = ["KVCache", "KVCacheLayer"]
