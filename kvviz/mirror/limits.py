"""One home for the engine's block-size range and default; every edge (CLI parsing, page widgets, file
readers) turns raw input into a ``BlockSize`` here, and the inside trusts it.

The range follows vLLM's ``CacheConfig.block_size`` (tokens per KV block; the default 16, powers of two
up to 256 in the literal it documents). A ``BlockSize`` is a plain ``int`` at run time (``NewType``).
"""

from __future__ import annotations

from typing import NewType

from kvviz.errors import CodedError

BlockSize = NewType("BlockSize", int)

MIN_BLOCK_SIZE = 1
MAX_BLOCK_SIZE = 256
DEFAULT_BLOCK_SIZE = BlockSize(16)
BLOCK_SIZE_CHOICES: tuple[BlockSize, ...] = tuple(BlockSize(1 << k) for k in range(9))  # 1, 2, 4, ..., 256
"""The sizes a widget offers (a page may show a subset of these)."""


def block_size(value: object) -> BlockSize:
    """``value`` as a ``BlockSize``: an int (not a bool) in MIN_BLOCK_SIZE..MAX_BLOCK_SIZE; ValueError
    with a one-line message otherwise (a CodedError: ``block_size_not_int`` / ``block_size_range``)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise CodedError(f"block size must be an integer, got {value!r}", "block_size_not_int",
                         value=repr(value)[:40])
    if not MIN_BLOCK_SIZE <= value <= MAX_BLOCK_SIZE:
        raise CodedError(f"block size must be in {MIN_BLOCK_SIZE}..{MAX_BLOCK_SIZE}, got {value}", "block_size_range",
                         low=MIN_BLOCK_SIZE, high=MAX_BLOCK_SIZE, value=value)
    return BlockSize(value)
