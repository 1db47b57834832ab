"""Replay a workload trace through kvviz's vLLM block pool (``BlockPool``) at one capacity.

Per request, as ``KVCacheManager.add_request`` does: find the longest run of cached full blocks
(capped at ``(input_tokens - 1) // block_size``), touch the hits, pop new blocks from the free-queue
head (evicting their old hashes), cache the newly full blocks. A request stays *running* (its blocks
pinned, ref_cnt > 0) until ``concurrency - 1`` later requests have been admitted; then it is freed
tail first. When the free blocks do not suffice, the oldest running requests finish first (they
would be waited for); a prompt needing more blocks than the whole pool is refused.

Differences from the pure-LRU definition, all counted here: pinned blocks of running requests are
not evictable; a partial last block takes a pool block but holds no hash (it never hits); vLLM
recomputes the last prompt token, so a Mooncake request whose prompt is a whole number of blocks
cannot hit its last block; recency is the free order, not the touch order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from kvviz.analysis.workload.trace import WorkloadTrace
from kvviz.mirror.block_pool import BlockPool, KVCacheBlock

MAX_POOL_BLOCKS = 4_000_000


@dataclass
class PoolReplay:
    """Outcome of one block-pool replay: hit tokens (total and per request), refused prompts,
    evictions, and how many requests had to wait for running ones to finish."""

    num_blocks: int
    concurrency: int
    input_tokens: int
    hit_tokens: int
    refused: int
    evictions: int
    waited: int
    uncached_partial_blocks: int
    per_request: list[int] = field(default_factory=list)

    @property
    def hit_rate(self) -> float:
        return self.hit_tokens / self.input_tokens if self.input_tokens else 0.0


def replay_block_pool(trace: WorkloadTrace, num_blocks: int, concurrency: int = 1) -> PoolReplay:
    """Replay ``trace`` through a ``BlockPool`` with ``num_blocks`` usable blocks (plus vLLM's null block 0,
    so the pool and the pure-LRU figure compare the same capacity) with ``concurrency`` requests running."""
    if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or not 1 <= num_blocks <= MAX_POOL_BLOCKS:
        raise ValueError(f"pool size must be an integer in 1..{MAX_POOL_BLOCKS:,} blocks, got {num_blocks!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency must be a positive integer, got {concurrency!r}")
    bs = trace.block_size
    events: list = []
    pool = BlockPool(num_blocks + 1, events=events, block_size=bs)
    running: deque[list[KVCacheBlock]] = deque()
    out = PoolReplay(num_blocks, concurrency, 0, 0, 0, 0, 0, 0)

    def finish_oldest() -> None:
        pool.free_blocks(running.popleft())

    for req in trace.requests:
        length = req.input_tokens
        out.input_tokens += length
        need = -(-length // bs)
        if need > num_blocks:
            out.refused += 1
            out.per_request.append(0)
            continue
        while len(running) >= concurrency:
            finish_oldest()
        hashes = [b.to_bytes(8, "big") for b in req.blocks[: req.full_blocks]]
        cap = min(len(hashes), max(length - 1, 0) // bs)
        hit: list[KVCacheBlock] = []
        for h in hashes[:cap]:
            block = pool.get_cached_block(h)
            if block is None:
                break
            hit.append(block)
        waited = False
        while need - len(hit) + sum(1 for b in hit if b.ref_cnt == 0) > pool.get_num_free_blocks():
            finish_oldest()
            waited = True
        out.waited += waited
        pool.touch(hit)
        new = pool.get_new_blocks(need - len(hit))
        blocks = hit + new
        pool.cache_full_blocks(blocks, hashes, len(hit), len(hashes))
        out.uncached_partial_blocks += need - len(hashes)
        running.append(blocks[::-1])
        hit_tokens = len(hit) * bs
        out.hit_tokens += hit_tokens
        out.per_request.append(hit_tokens)
        events.clear()
    out.evictions = pool.num_evictions
    return out
