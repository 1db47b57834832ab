"""Capacity and paging on top of per-token KV sizes: blocks per request, requests that fit a memory
budget, the waste of contiguous max-length reservations against paged blocks.

Invariant: exact arithmetic (``int`` / ``Fraction``) as in kvviz.analysis.sizes.kvsize; block counts round up.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kvviz.analysis.sizes.kv_formula import (
    bytes_per_layer_per_token,
    bytes_per_token,
    exact_request_bytes,
    total_bytes,
)
from kvviz.analysis.sizes.kvsize import MAX_BATCH, MAX_TOKENS, KVSizeError, ModelShape, check_count
from kvviz.mirror.events import usable_blocks
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE, MAX_BLOCK_SIZE
from kvviz.util.units import GIB, as_number

# ---------------------------------------------------------------------------------------------
# Capacity and paging
# ---------------------------------------------------------------------------------------------

PAGED_ATTENTION_UTILISATION: tuple[float, float] = (0.204, 0.382)
"""Share of KV memory holding real tokens in pre-PagedAttention systems (the vLLM paper)."""

GPU_BUDGETS_GIB: tuple[int, ...] = (24, 80, 141)
"""Reference memory budgets: a 24 GiB card, an 80 GiB A100/H100, a 141 GiB H200."""



def _blocks(tokens: int, block_size: int) -> int:
    return -(-tokens // block_size)


def null_block_bytes(shape: ModelShape, dtype: str, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """Bytes of the one block an engine never fills: vLLM's BlockPool reserves block 0 of every KV layer as
    its null block at start-up (as kvviz.mirror.block_pool does), so a budget holds one block less of tokens."""
    return math.ceil(bytes_per_token(shape, dtype) * block_size)


def gib_bytes(gib: float | Fraction) -> int:
    """``gib`` GiB in whole bytes, exactly for the number given (the calculator, the workload page and the CLI
    turn a typed GiB budget into bytes here)."""
    return int(Fraction(gib) * GIB)


@dataclass(frozen=True)
class BudgetBlocks:
    """A KV budget cut into blocks as vLLM sizes its pool: whole blocks only (``budget // bytes_per_block``),
    and of those, all but the null block can hold tokens (kvviz.mirror.events.usable_blocks)."""

    budget_bytes: int
    block_size: int
    bytes_per_block: Fraction
    num_blocks: int
    """Blocks in the pool, the null block (block 0) included."""
    usable_blocks: int
    """Blocks that can ever hold tokens: ``num_blocks`` less the null block (0 for an empty pool)."""

    @property
    def usable_bytes(self) -> Fraction:
        return self.usable_blocks * self.bytes_per_block

    @property
    def token_slots(self) -> int:
        return self.usable_blocks * self.block_size

    def to_dict(self) -> dict[str, Any]:
        return {"budget_bytes": self.budget_bytes, "block_size": self.block_size,
                "bytes_per_block": as_number(self.bytes_per_block), "num_blocks": self.num_blocks,
                "usable_blocks": self.usable_blocks, "token_slots": self.token_slots}


def budget_blocks(bytes_per_token: int | Fraction, budget_bytes: int, block_size: int = DEFAULT_BLOCK_SIZE) -> BudgetBlocks:
    """``budget_bytes`` of KV memory as a pool of blocks of ``block_size`` tokens at ``bytes_per_token``: the one
    "GiB budget -> blocks, with the null block" rule of the calculator, the workload page and the CLI."""
    budget_bytes = check_count("budget bytes", budget_bytes, low=0, high=1 << 60)
    block_size = check_count("block_size", block_size, high=1 << 20)  # a trace's blocks: Mooncake's are 512
    per_block = Fraction(bytes_per_token) * block_size
    if per_block <= 0:
        raise KVSizeError("a block of no bytes cannot divide a budget", "no_kv")
    num = int(budget_bytes // per_block)
    return BudgetBlocks(budget_bytes, block_size, per_block, num, usable_blocks(num) if num else 0)


def usable_budget(shape: ModelShape, dtype: str, budget_bytes: int, block_size: int = DEFAULT_BLOCK_SIZE) -> Fraction:
    """The part of ``budget_bytes`` that can hold tokens: its whole blocks less the null block (0 when the
    model has no KV)."""
    bpt = bytes_per_token(shape, dtype)
    return budget_blocks(bpt, budget_bytes, block_size).usable_bytes if bpt else Fraction(budget_bytes)


def paged_request_bytes(shape: ModelShape, dtype: str, tokens: int, block_size: int = DEFAULT_BLOCK_SIZE) -> int:
    """Bytes one request of ``tokens`` occupies when KV is allocated in whole blocks.

    Full layers hold ``ceil(tokens / block_size)`` blocks; sliding layers hold the window's tokens
    rounded up to whole blocks (an engine may briefly hold one more while the window straddles a
    block boundary). Rounded up to a whole byte.
    """
    block_size = check_count("block_size", block_size, high=MAX_BLOCK_SIZE)
    per_layer = bytes_per_layer_per_token(shape, dtype)
    slots = shape.num_full_layers * _blocks(tokens, block_size) * block_size
    if shape.num_sliding_layers:
        kept = min(tokens, shape.sliding_window or 0)
        slots += shape.num_sliding_layers * _blocks(kept, block_size) * block_size
    return math.ceil(per_layer * slots)


def paged_waste_bound(shape: ModelShape, dtype: str, block_size: int = DEFAULT_BLOCK_SIZE, batch: int = 1) -> Fraction:
    """The most paging can leave unused: one partly filled block per request and KV layer, i.e.
    ``block_size - 1`` token slots each (exact; allocations round up to a whole byte per request)."""
    block_size = check_count("block_size", block_size, high=MAX_BLOCK_SIZE)
    batch = check_count("batch", batch, high=MAX_BATCH)
    return bytes_per_layer_per_token(shape, dtype) * (block_size - 1) * shape.num_kv_layers * batch


def max_context(shape: ModelShape, dtype: str, budget_bytes: int, block_size: int = DEFAULT_BLOCK_SIZE) -> int | None:
    """Longest single request whose paged KV fits in ``budget_bytes`` less the null block; None when KV
    stops growing (no full-attention layers) and its cap fits."""
    if bytes_per_token(shape, dtype) == 0:
        return None
    budget_bytes = usable_budget(shape, dtype, budget_bytes, block_size)
    if shape.num_full_layers == 0:
        cap = paged_request_bytes(shape, dtype, shape.sliding_window or 0, block_size)
        if cap <= budget_bytes:
            return None
        hi = shape.sliding_window or 0
    else:
        per_full = bytes_per_layer_per_token(shape, dtype) * shape.num_full_layers
        hi = int(budget_bytes / per_full) + block_size
    lo = 0
    while lo < hi:  # largest t with paged bytes <= budget; paged bytes never decrease with t
        mid = (lo + hi + 1) // 2
        if paged_request_bytes(shape, dtype, mid, block_size) <= budget_bytes:
            lo = mid
        else:
            hi = mid - 1
    return lo


@dataclass(frozen=True)
class Capacity:
    """How a memory budget holds this model's KV cache."""

    budget_bytes: int
    context_tokens: int
    block_size: int
    bytes_per_block: Fraction
    """``block_size x bytes_per_token``: one block across every KV layer."""
    blocks_per_request: int
    """``ceil(context / block_size)`` blocks per full-attention layer."""
    request_bytes: int
    """Exact KV of one request at ``context_tokens``."""
    request_bytes_paged: int
    """The same request allocated in whole blocks."""
    null_block_bytes: int
    """The block the engine reserves (block 0): no token is ever stored in it."""
    num_blocks: int | None
    """Whole blocks in the budget, the null block included (None when bytes/token is 0)."""
    usable_blocks: int | None
    """``num_blocks`` less the null block: the blocks that hold tokens."""
    max_tokens: int | None
    """Token slots in the budget less the null block, if every KV layer holds every token (None when
    bytes/token is 0)."""
    max_requests: int | None
    """Requests of ``context_tokens`` that fit, paged, beside the null block (None when a request costs
    nothing)."""
    max_context: int | None
    """Longest single request that fits beside the null block (None: KV stops growing and fits)."""

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_bytes": self.budget_bytes,
            "budget_gib": as_number(Fraction(self.budget_bytes, GIB)),
            "context_tokens": self.context_tokens,
            "block_size": self.block_size,
            "bytes_per_block": as_number(self.bytes_per_block),
            "blocks_per_request": self.blocks_per_request,
            "request_bytes": self.request_bytes,
            "request_bytes_paged": self.request_bytes_paged,
            "null_block_bytes": self.null_block_bytes,
            "num_blocks": self.num_blocks,
            "usable_blocks": self.usable_blocks,
            "max_tokens": self.max_tokens,
            "max_requests": self.max_requests,
            "max_context": self.max_context,
        }


def capacity(
    shape: ModelShape,
    dtype: str,
    budget_bytes: int,
    context_tokens: int,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> Capacity:
    """Maximum tokens, maximum requests of ``context_tokens`` and block arithmetic for a budget."""
    budget_bytes = check_count("budget bytes", budget_bytes, high=1 << 60)
    context_tokens = check_count("context tokens", context_tokens, high=MAX_TOKENS)
    block_size = check_count("block_size", block_size, high=MAX_BLOCK_SIZE)
    bpt = bytes_per_token(shape, dtype)
    paged = paged_request_bytes(shape, dtype, context_tokens, block_size)
    usable = usable_budget(shape, dtype, budget_bytes, block_size)
    blocks = budget_blocks(bpt, budget_bytes, block_size) if bpt else None
    return Capacity(
        budget_bytes=budget_bytes,
        context_tokens=context_tokens,
        block_size=block_size,
        bytes_per_block=bpt * block_size,
        blocks_per_request=_blocks(context_tokens, block_size),
        request_bytes=math.ceil(exact_request_bytes(shape, dtype, context_tokens)),
        request_bytes_paged=paged,
        null_block_bytes=null_block_bytes(shape, dtype, block_size),
        num_blocks=blocks.num_blocks if blocks else None,
        usable_blocks=blocks.usable_blocks if blocks else None,
        max_tokens=int(usable // bpt) if bpt else None,
        max_requests=usable // paged if paged else None,
        max_context=max_context(shape, dtype, budget_bytes, block_size),
    )


@dataclass(frozen=True)
class PagingComparison:
    """Contiguous max-length reservation versus paged blocks for ``batch`` requests of ``tokens``."""

    tokens: int
    max_len: int
    batch: int
    block_size: int
    used_bytes: int
    """KV the tokens really need."""
    contiguous_bytes: int
    """Reserved when every request gets a contiguous slab for ``max_len`` tokens up front."""
    paged_bytes: int
    """Allocated in whole blocks: waste is at most one partly filled block per request and layer."""

    @property
    def contiguous_waste(self) -> int:
        return self.contiguous_bytes - self.used_bytes

    @property
    def paged_waste(self) -> int:
        return self.paged_bytes - self.used_bytes

    @property
    def contiguous_utilisation(self) -> float:
        return self.used_bytes / self.contiguous_bytes if self.contiguous_bytes else 1.0

    @property
    def paged_utilisation(self) -> float:
        return self.used_bytes / self.paged_bytes if self.paged_bytes else 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "tokens": self.tokens,
            "max_len": self.max_len,
            "batch": self.batch,
            "block_size": self.block_size,
            "used_bytes": self.used_bytes,
            "contiguous_bytes": self.contiguous_bytes,
            "paged_bytes": self.paged_bytes,
            "contiguous_waste_bytes": self.contiguous_waste,
            "paged_waste_bytes": self.paged_waste,
            "contiguous_utilisation": round(self.contiguous_utilisation, 4),
            "paged_utilisation": round(self.paged_utilisation, 4),
            "paper_utilisation_range": list(PAGED_ATTENTION_UTILISATION),
        }


def paging_comparison(
    shape: ModelShape,
    dtype: str,
    tokens: int,
    max_len: int,
    batch: int = 1,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> PagingComparison:
    """Compare reserving ``max_len`` contiguously per request with paging ``tokens`` into blocks."""
    tokens = check_count("tokens", tokens, high=MAX_TOKENS)
    max_len = check_count("max_len", max_len, high=MAX_TOKENS)
    if max_len < tokens:
        raise KVSizeError(f"max_len ({max_len:,}) must be at least the tokens used ({tokens:,})")
    batch = check_count("batch", batch, high=MAX_BATCH)
    return PagingComparison(
        tokens=tokens,
        max_len=max_len,
        batch=batch,
        block_size=block_size,
        used_bytes=total_bytes(shape, dtype, tokens, batch),
        contiguous_bytes=total_bytes(shape, dtype, max_len, batch),
        paged_bytes=paged_request_bytes(shape, dtype, tokens, block_size) * batch,
    )


@dataclass(frozen=True)
class BudgetRow:
    """One GPU budget against the memory a workload needs."""

    budget_gib: float
    budget_bytes: int
    needed_bytes: int
    fits: bool
    """All ``batch`` requests fit in whole blocks beside the null block (``max_requests >= batch``)."""
    share: float
    """needed / budget: the exact KV, before rounding to blocks."""
    max_requests: int | None
    """Requests of this length that fit the budget, paged, beside the null block."""


def budget_rows(
    shape: ModelShape,
    dtype: str,
    tokens: int,
    batch: int,
    budgets_gib: Iterable[float] = GPU_BUDGETS_GIB,
    block_size: int = DEFAULT_BLOCK_SIZE,
) -> list[BudgetRow]:
    """KV memory for ``batch`` x ``tokens`` against each budget (KV only: weights need their share too).
    Invariant: ``fits`` and ``max_requests`` come from the same paged arithmetic, so they never disagree."""
    needed = total_bytes(shape, dtype, tokens, batch)
    per_request = paged_request_bytes(shape, dtype, tokens, block_size)
    rows = []
    for gib in budgets_gib:
        budget = gib_bytes(gib)
        max_requests = usable_budget(shape, dtype, budget, block_size) // per_request if per_request else None
        rows.append(
            BudgetRow(
                budget_gib=gib,
                budget_bytes=budget,
                needed_bytes=needed,
                fits=max_requests >= batch if max_requests is not None else needed <= budget,
                share=needed / budget if budget else math.inf,
                max_requests=max_requests,
            )
        )
    return rows
