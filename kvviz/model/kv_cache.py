"""The native decoder's KV cache: per-layer K and V of the positions computed so far, in the layout of
transformers' DynamicCache, and a cache that borrows another request's prefix inside a forward pass.

Invariant: a cache grows by replacing its tensors with new ones, so tensors handed to it (a reused
prefix) or viewed from it (a borrower's loan) are never modified; its K are post-rotary, exactly what an
engine stores.
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


class LenderFailed(RuntimeError):
    """A cache borrows a prefix from another request's cache, and that request's pass did not fill it."""


class KVCache:
    """Per-layer K/V of the positions computed so far (the layout of transformers' DynamicCache).

    A cache may instead *borrow* its prefix: the first ``lent_tokens`` positions of another request's
    cache (``lender``) that a forward pass is filling, in this pass or an earlier one. It reports that
    length before it holds anything; ``take_loan`` makes its layers views of the lender's."""

    def __init__(self, num_layers: int, data: list[tuple[torch.Tensor, torch.Tensor]] | None = None, *,
                 lender: KVCache | None = None, lent_tokens: int = 0) -> None:
        if data is not None and len(data) != num_layers:
            raise ValueError(f"{len(data)} layers of K/V for a {num_layers}-layer model")
        if (lender is None) != (lent_tokens <= 0) or (lender is not None and data):
            raise ValueError("a cache borrows a positive number of tokens from one lender, or holds its own data")
        self.layers = [KVCacheLayer(*pair) for pair in data] if data else [KVCacheLayer() for _ in range(num_layers)]
        self.lender, self.lent_tokens = lender, lent_tokens

    @property
    def on_loan(self) -> bool:
        """True while the cache borrows a prefix it does not hold yet."""
        return self.lender is not None and self.layers[0].keys is None

    def get_seq_length(self) -> int:
        if self.on_loan:
            return self.lent_tokens
        keys = self.layers[0].keys if self.layers else None
        return 0 if keys is None else int(keys.shape[-2])

    def take_loan(self) -> None:
        """Hold the borrowed prefix: views of the lender's first ``lent_tokens`` positions, which an
        earlier pass computed (raises LenderFailed when it did not)."""
        if not self.on_loan:
            return
        lender = self.lender
        if lender.on_loan or lender.get_seq_length() < self.lent_tokens:
            raise LenderFailed("the request that computes this prompt's shared prefix failed")
        n = self.lent_tokens
        for mine, theirs in zip(self.layers, lender.layers, strict=True):
            mine.keys, mine.values = theirs.keys[:, :, :n], theirs.values[:, :, :n]


__all__ = ["KVCache", "KVCacheLayer", "LenderFailed"]
