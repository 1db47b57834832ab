"""Compare prompt B against a prefix cache filled by prompt A, block by block.

Statuses of B's blocks: ``hit`` (its chained hash is cached by A), ``miss`` (its tokens differ from
A's block at the same index, or A has no full block there), ``invalidated`` (same tokens as A's block
but a different hash, because an earlier block or the cache salt changed: the chain cascade) and
``partial`` (an incomplete last block, never cached). A ``hit`` block can still be recomputed: the
engine caps reuse at ``num_tokens - 1`` tokens (``reused`` says which). The cache and its hit rule are
the manager's own: A is admitted to a ``KVCacheManager`` and finished, B's reuse is the manager's
longest-hit lookup. Each block carries a reason ``code`` and its ``params``; the view renders words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_SEED,
    BlockHashRecord,
    hash_request_blocks,
    validate_token_ids,
)
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE, BlockSize
from kvviz.mirror.manager import KVCacheManager, cdiv

STATUSES = ("hit", "miss", "invalidated", "partial")


@dataclass(frozen=True)
class BlockComparison:
    """Block ``index`` of prompt B (tokens ``[start, end)``) against A's block at the same index."""

    index: int
    start: int
    end: int
    status: str
    code: str
    params: dict[str, Any] = field(compare=False)
    hash_a: bytes | None
    hash_b: bytes | None
    parent_a: bytes | None
    parent_b: bytes
    tokens_a: tuple[int, ...]
    tokens_b: tuple[int, ...]
    reused: bool


@dataclass(frozen=True)
class PromptComparison:
    """Per-block comparison plus totals. ``common_prefix_tokens`` is the raw token match;
    ``reused_tokens`` the whole-block reuse an engine gets (capped at ``num_tokens_b - 1``);
    ``first_changed_token`` B's first token differing from A (None when B is a prefix of A)."""

    blocks: tuple[BlockComparison, ...]
    common_prefix_tokens: int
    reused_tokens: int
    recompute_tokens: int
    first_changed_token: int | None
    num_tokens_a: int
    num_tokens_b: int
    block_size: BlockSize
    hash_name: str
    none_hash: bytes

    def count(self, status: str) -> int:
        return sum(1 for b in self.blocks if b.status == status)

    @property
    def reused_blocks(self) -> int:
        return sum(1 for b in self.blocks if b.reused)


def common_prefix_length(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def compare_prompts(
    tokens_a: Sequence[int],
    tokens_b: Sequence[int],
    block_size: BlockSize = DEFAULT_BLOCK_SIZE,
    hash_name: str = DEFAULT_HASH,
    seed: str | None = DEFAULT_SEED,
    salt_a: str | None = None,
    salt_b: str | None = None,
) -> PromptComparison:
    """What prompt B reuses from a cache that holds every full block of prompt A."""
    a = validate_token_ids(tokens_a)
    b = validate_token_ids(tokens_b)
    # The engine itself: A runs and finishes, so every full block of A is cached (and free).
    manager = KVCacheManager(cdiv(len(a), block_size) + 1, block_size, hash_name, seed)
    manager.add_request("A", a, salt_a)
    manager.free_request("A")
    fn, none_hash = manager.hash_fn, manager.none_hash
    rec_a = hash_request_blocks(a, block_size, fn, none_hash, cache_salt=salt_a)
    rec_b = hash_request_blocks(b, block_size, fn, none_hash, cache_salt=salt_b)
    num_reused = len(manager.peek_cache_hit(b, salt_b, sliding_window=None).block_ids)
    is_cached = manager.block_pool.get_cached_block
    common = common_prefix_length(a, b)
    salts_differ = (salt_a or None) != (salt_b or None)

    blocks: list[BlockComparison] = []
    for rb in rec_b:
        ra: BlockHashRecord | None = rec_a[rb.index] if rb.index < len(rec_a) else None
        a_full = ra is not None and ra.full
        cached = rb.hash is not None and is_cached(rb.hash) is not None
        status, code, params = _classify(rb, ra, a_full, cached, block_size, common, salts_differ)
        reused = rb.index < num_reused
        if status == "hit" and not reused:
            code, params = "hit_capped", {}
        blocks.append(BlockComparison(
            index=rb.index, start=rb.start, end=rb.end, status=status, code=code, params=params,
            hash_a=ra.hash if ra is not None else None, hash_b=rb.hash,
            parent_a=ra.parent if ra is not None else None, parent_b=rb.parent,
            tokens_a=ra.tokens if ra is not None else (), tokens_b=rb.tokens, reused=reused,
        ))
    reused_tokens = sum(1 for blk in blocks if blk.reused) * block_size
    return PromptComparison(
        blocks=tuple(blocks),
        common_prefix_tokens=common,
        reused_tokens=reused_tokens,
        recompute_tokens=len(b) - reused_tokens,
        first_changed_token=common if common < len(b) else None,
        num_tokens_a=len(a),
        num_tokens_b=len(b),
        block_size=block_size,
        hash_name=hash_name,
        none_hash=none_hash,
    )


def _classify(
    rb: BlockHashRecord,
    ra: BlockHashRecord | None,
    a_full: bool,
    cached: bool,
    block_size: BlockSize,
    common: int,
    salts_differ: bool,
) -> tuple[str, str, dict[str, Any]]:
    """(status, reason code, params) of B's block ``rb`` against A's block ``ra``."""
    if not rb.full:
        return "partial", "partial", {"count": rb.num_tokens, "block_size": block_size}
    if cached:
        return "hit", "hit", {"index": rb.index}
    if ra is None or not a_full:
        return "miss", "miss_no_block", {"index": rb.index}
    if ra.tokens != rb.tokens:
        first = rb.start + common_prefix_length(ra.tokens, rb.tokens)
        return "miss", "miss_tokens", {"index": rb.index, "token": first}
    if rb.index == 0:
        return "invalidated", "invalidated_salt", {}
    if common >= rb.start and salts_differ:
        return "invalidated", "invalidated_chain_salt", {"index": rb.index}
    changed = min(common // block_size, rb.index - 1)
    return "invalidated", "invalidated_chain", {"index": rb.index, "changed": changed}
