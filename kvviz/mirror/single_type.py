"""The longest-cache-hit searches per attention type, with vLLM v1 semantics
(``vllm/v1/core/single_type_kv_cache_manager.py``): full attention stops at the first miss; sliding
window needs only the last window's blocks. Pure functions of the hashes and a lookup."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvviz.mirror.hashing import BlockHash
from kvviz.mirror.kv_cache_utils import KVCacheBlock
from kvviz.mirror.limits import BlockSize

Lookup = Callable[[BlockHash], KVCacheBlock | None]


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def find_longest_cache_hit(
    block_hashes: Sequence[BlockHash], max_length: int, block_size: BlockSize, lookup: Lookup
) -> list[KVCacheBlock]:
    """Full attention (vLLM ``FullAttentionManager``): cached blocks for the longest run of hashes
    from the start, at most ``max_length // block_size`` blocks, stopping at the first miss (the
    chain means nothing after a miss can be cached)."""
    hits: list[KVCacheBlock] = []
    for block_hash in block_hashes[: max(max_length, 0) // block_size]:
        block = lookup(block_hash)
        if block is None:
            break
        hits.append(block)
    return hits


def find_longest_cache_hit_sliding_window(
    block_hashes: Sequence[BlockHash], max_length: int, block_size: BlockSize, sliding_window: int, lookup: Lookup
) -> list[KVCacheBlock | None]:
    """Sliding-window attention (vLLM ``SlidingWindowManager``): only the last ``sliding_window - 1``
    tokens before the next one are attended to, so a hit needs just ``cdiv(sliding_window - 1,
    block_size)`` contiguous cached blocks. Searches right to left and returns the blocks up to the
    end of the first such run, with None (vLLM's null block) for the skipped positions before it.
    Without such a run, the contiguous hit from the start (possibly shorter) is returned."""
    needed = cdiv(sliding_window - 1, block_size)
    max_blocks = min(max(max_length, 0) // block_size, len(block_hashes))
    computed: list[KVCacheBlock | None] = [None] * max_blocks
    contiguous = 0
    for i in range(max_blocks - 1, -1, -1):
        block = lookup(block_hashes[i])
        if block is None:
            contiguous = 0
            continue
        computed[i] = block
        contiguous += 1
        if contiguous >= needed:
            return computed[: i + contiguous]
    return computed[:contiguous]


@dataclass(frozen=True)
class CacheHit:
    """Read-only lookup result: ``block_ids`` per reused logical block (None = skipped by the
    sliding window) and the number of prompt tokens they cover."""

    block_ids: tuple[int | None, ...]
    num_computed_tokens: int
    block_hashes: tuple[BlockHash, ...]
