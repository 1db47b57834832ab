"""The native decoder's KV cache and the attention over it (kvviz.model.prefill's passes; the engine keeps
its K/V in its own paged memory and brings its own ``KVAttention``, ``kvviz.engine.attention``).

A ``KVCache`` holds per-layer K and V of the positions computed so far, in the layout of transformers'
DynamicCache. Invariant: a cache grows by replacing its tensors with new ones, so tensors handed to it (a
reused prefix) are never modified; its K are post-rotary, exactly what an engine stores.
"""

from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F


class KVAttention(Protocol):
    """Where a layer's new K/V go and what its queries attend to: the one seam between the decoder layers
    (``kvviz.model.llama``) and a K/V store (a ``KVCache`` here, the engine's paged blocks there)."""

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               rows: torch.Tensor | None = None) -> torch.Tensor:
        """Store ``k``, ``v`` ``[T, kv_heads, d]`` (K post-rotary) for ``layer``, then attend: queries ``q``
        ``[T, heads, d]`` over everything before them and themselves -> ``[T, heads, d]``, or ``[R, heads, d]``
        of the query rows ``rows`` ``[R]`` only (every new K/V is stored all the same)."""
        ...


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


def causal_mask(past: int, n: int, device: torch.device) -> torch.Tensor | None:
    """``n`` new queries after ``past`` cached positions: ``[n, past + n]`` bool, query past+i sees keys
    0..past+i. With no past SDPA's ``is_causal`` is that mask (None here); with a past its top-left
    alignment is not, so the mask is explicit; one query sees everything (None)."""
    if not past or n <= 1:
        return None
    return torch.arange(past + n, device=device)[None, :] <= (past + torch.arange(n, device=device))[:, None]


class CacheAttention:
    """``KVAttention`` over one sequence's ``KVCache`` (None: no cache, the new tokens attend to themselves):
    new K/V are appended, queries attend to the cached positions followed by the new ones."""

    def __init__(self, cache: KVCache | None, heads: int, kv_heads: int, head_dim: int, n: int,
                 device: torch.device) -> None:
        self.cache = cache
        self.past = cache.get_seq_length() if cache is not None else 0
        self.mask = causal_mask(self.past, n, device)  # [n, past + n] or None
        self.causal = self.mask is None and n > 1
        self.scale = head_dim ** -0.5
        self.gqa = heads != kv_heads

    def attend(self, layer: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
               rows: torch.Tensor | None = None) -> torch.Tensor:
        k4, v4 = k.transpose(0, 1).unsqueeze(0), v.transpose(0, 1).unsqueeze(0)  # [1, kv_heads, T, d]
        if self.cache is not None:
            k4, v4 = self.cache.layers[layer].update(k4, v4)  # [1, kv_heads, past + T, d]
        # enable_gqa: each K/V head serves its group of query heads in place (no repeated copies of the
        # prefix; the same result as repeat_interleave, bit for bit)
        o = F.scaled_dot_product_attention(q.transpose(0, 1).unsqueeze(0), k4, v4, attn_mask=self.mask,
                                           is_causal=self.causal, scale=self.scale, enable_gqa=self.gqa)
        o = o[0].transpose(0, 1)  # [1, heads, T, d] -> [T, heads, d]
        return o if rows is None else o[rows]  # [R, heads, d]


__all__ = ["CacheAttention", "KVAttention", "KVCache", "KVCacheLayer", "causal_mask"]
