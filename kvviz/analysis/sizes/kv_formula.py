"""The KV-bytes formula and the calculator's report for one model at one dtype, length and concurrency.

``bytes_per_token = 2 (K and V) x n_kv_layers x n_kv_heads x head_dim x bytes_per_value``; an MLA
layer keeps one latent of ``kv_lora_rank + qk_rope_head_dim`` values instead (no factor 2).

Invariant: every quantity here is exact (``int`` or ``Fraction``). Rounding happens only when a
number is formatted for people (``format_bytes``), and totals of whole allocations round *up* to a
whole byte (``total_bytes``), because memory is allocated in bytes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kvviz.analysis.sizes.kvsize import (
    MAX_BATCH,
    MAX_TOKENS,
    LayerKind,
    ModelShape,
    check_count,
    dtype_bytes,
    normalize_dtype,
)
from kvviz.util.units import as_number, format_bytes, format_exact, format_plain, ratio


def bytes_per_layer_per_token(shape: ModelShape, dtype: str) -> Fraction:
    """Bytes one KV layer adds per token."""
    return shape.values_per_layer * dtype_bytes(dtype)


def bytes_per_token(shape: ModelShape, dtype: str) -> Fraction:
    """Bytes of KV cache one more token costs, counting every layer that keeps per-token KV."""
    return shape.num_kv_layers * bytes_per_layer_per_token(shape, dtype)


def all_layers_bytes_per_token(shape: ModelShape, dtype: str) -> Fraction:
    """The formula as the articles apply it: every layer counted as if it cached K/V."""
    return shape.num_layers * bytes_per_layer_per_token(shape, dtype)


def naive_bytes_per_token(shape: ModelShape, dtype: str) -> Fraction:
    """The short form ``2 x n_layers x d_model x bytes``: right only for MHA with d_model = heads x head_dim."""
    return 2 * shape.num_layers * shape.d_model * dtype_bytes(dtype)


def exact_request_bytes(shape: ModelShape, dtype: str, tokens: int) -> Fraction:
    """Exact KV bytes of one sequence of ``tokens``: sliding layers keep at most their window."""
    per_layer = bytes_per_layer_per_token(shape, dtype)
    full = shape.num_full_layers * tokens
    sliding = shape.num_sliding_layers * (min(tokens, shape.sliding_window) if shape.num_sliding_layers else 0)
    return per_layer * (full + sliding)


def total_bytes(shape: ModelShape, dtype: str, tokens: int, batch: int = 1) -> int:
    """KV bytes of ``batch`` sequences of ``tokens`` each, rounded up to a whole byte."""
    tokens = check_count("tokens", tokens, low=0, high=MAX_TOKENS)
    batch = check_count("batch", batch, high=MAX_BATCH)
    return math.ceil(exact_request_bytes(shape, dtype, tokens) * batch)


@dataclass(frozen=True)
class LayerGroup:
    """One kind of layer in a model: how many, and what each costs per token."""

    kind: LayerKind
    count: int
    bytes_per_token: Fraction
    """Per-token bytes of all layers of this kind (0 for state layers)."""


def layer_groups(shape: ModelShape, dtype: str) -> list[LayerGroup]:
    """The model's layers grouped by kind, in the order full, sliding, state; empty groups left out."""
    per_layer = bytes_per_layer_per_token(shape, dtype)
    groups = []
    for kind in LayerKind:
        n = shape.count(kind)
        if n:
            groups.append(LayerGroup(kind, n, per_layer * n if kind != LayerKind.STATE else Fraction(0)))
    return groups


@dataclass(frozen=True)
class KVReport:
    """Everything the calculator says about one model at one dtype, length and concurrency."""

    shape: ModelShape
    dtype: str
    bytes_per_value: Fraction
    bytes_per_token: Fraction
    all_layers_bytes_per_token: Fraction
    naive_bytes_per_token: Fraction
    tokens: int
    batch: int
    request_bytes: int
    total_bytes: int

    @property
    def naive_factor(self) -> Fraction | None:
        """How many times the short form overstates the config-exact figure (None if that is 0)."""
        if self.bytes_per_token == 0:
            return None
        return self.naive_bytes_per_token / self.bytes_per_token

    @property
    def all_layers_factor(self) -> Fraction | None:
        """How many times the all-layers figure exceeds the config-exact one (1 for plain models)."""
        if self.bytes_per_token == 0:
            return None
        return self.all_layers_bytes_per_token / self.bytes_per_token

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready numbers (ints stay ints; fractional bytes become floats)."""
        s = self.shape
        return {
            "model": s.name,
            "attention": s.attention,
            "dtype": self.dtype,
            "bytes_per_value": as_number(self.bytes_per_value),
            "bytes_per_token": as_number(self.bytes_per_token),
            "bytes_per_token_human": format_bytes(self.bytes_per_token),
            "naive_bytes_per_token": as_number(self.naive_bytes_per_token),
            "naive_factor": ratio(self.naive_factor),
            "all_layers_bytes_per_token": as_number(self.all_layers_bytes_per_token),
            "num_layers": s.num_layers,
            "num_kv_layers": s.num_kv_layers,
            "num_full_layers": s.num_full_layers,
            "num_sliding_layers": s.num_sliding_layers,
            "num_state_layers": s.num_state_layers,
            "sliding_window": s.sliding_window if s.num_sliding_layers else None,
            "num_heads": s.num_heads,
            "num_kv_heads": s.num_kv_heads if s.mla is None else None,
            "head_dim": s.head_dim if s.mla is None else None,
            "d_model": s.d_model,
            "kv_lora_rank": s.mla.kv_lora_rank if s.mla else None,
            "qk_rope_head_dim": s.mla.qk_rope_head_dim if s.mla else None,
            "values_per_layer_per_token": s.values_per_layer,
            "formula": formula_text(s, self.dtype),
            "tokens": self.tokens,
            "batch": self.batch,
            "request_bytes": self.request_bytes,
            "total_bytes": self.total_bytes,
            "total_human": format_bytes(self.total_bytes),
            "warnings": list(s.warnings),
        }


def report(shape: ModelShape, dtype: str, tokens: int = 1, batch: int = 1) -> KVReport:
    """Compute the full calculator result for ``batch`` requests of ``tokens`` each."""
    dtype = normalize_dtype(dtype)
    tokens = check_count("tokens", tokens, low=0, high=MAX_TOKENS)
    batch = check_count("batch", batch, high=MAX_BATCH)
    return KVReport(
        shape=shape,
        dtype=dtype,
        bytes_per_value=dtype_bytes(dtype),
        bytes_per_token=bytes_per_token(shape, dtype),
        all_layers_bytes_per_token=all_layers_bytes_per_token(shape, dtype),
        naive_bytes_per_token=naive_bytes_per_token(shape, dtype),
        tokens=tokens,
        batch=batch,
        request_bytes=total_bytes(shape, dtype, tokens, 1),
        total_bytes=total_bytes(shape, dtype, tokens, batch),
    )


def formula_text(shape: ModelShape, dtype: str) -> str:
    """The formula with this model's numbers, e.g. ``2 x 32 x 32 x 128 x 2 B = 524,288 B``."""
    b = dtype_bytes(dtype)
    total = bytes_per_token(shape, dtype)
    layers = shape.num_kv_layers
    if shape.mla is not None:
        body = f"{layers} x ({shape.mla.kv_lora_rank} + {shape.mla.qk_rope_head_dim}) x {format_plain(b)} B"
    else:
        body = f"2 x {layers} x {shape.num_kv_heads} x {shape.head_dim} x {format_plain(b)} B"
    return f"{body} = {format_exact(total)}"
