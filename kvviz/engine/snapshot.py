"""EngineView: one consistent snapshot of the running engine for the live view (pure records, no torch):
requests with their block tables, the free queue head to tail, ref_cnt and cached state per block, the
step timeline and the counters. Taken between steps (``EngineLoop.call(engine_view)``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.engine.engine import LLMEngine
from kvviz.engine.request import EngineStats
from kvviz.engine.steps import StepRecord
from kvviz.mirror.host_pool import RequestHits


@dataclass(frozen=True)
class RequestView:
    """A request in the engine: its block table (logical block i -> physical block id) and progress."""

    request_id: str
    status: str
    num_prompt_tokens: int
    num_computed_tokens: int
    num_output_tokens: int
    num_cached_tokens: int
    num_preemptions: int
    block_ids: tuple[int, ...]
    client: str = ""  # who sent it (an API client's label; "" for the pages)


@dataclass(frozen=True)
class EngineView:
    num_blocks: int
    block_size: int
    kv_cache_bytes: int
    block_bytes: int
    ref_cnt: tuple[int, ...]  # per physical block (block 0, the null block, first)
    cached: tuple[bool, ...]  # block holds a hash (its K/V can be hit)
    free_queue: tuple[int, ...]  # head (evicted first) to tail
    requests: tuple[RequestView, ...]
    steps: tuple[StepRecord, ...]
    stats: EngineStats
    tiers: TierView | None = None  # the host tier beside the device pool; None when it is off


@dataclass(frozen=True)
class TierView:
    """Both tiers side by side, and a block's journey as totals since start. Invariants: held + free =
    blocks in each tier; cached_in_host <= cached; loaded + dropped <= stored."""

    device_blocks: int  # usable device blocks (the null block left out)
    device_held: int  # in use by a request or holding a hash
    device_cached: int  # holding a hash (can be hit)
    cached_in_host: int  # of device_cached, those whose hash the host tier holds too
    host_blocks: int
    host_held: int
    host_bytes: int
    both_on_host: bool  # a CPU-only engine: the device pool is host memory too
    computed: int  # device blocks computed and cached (given a hash; the ones loaded back left out)
    evicted: int  # cached device blocks evicted (their hash dropped from the device pool)
    stored: int  # blocks copied to the host tier
    loaded: int  # blocks copied back from the host tier on a hit
    dropped: int  # blocks evicted from the host tier (by its policy)
    skipped: int  # stores skipped whole: too few host blocks could be evicted
    recent: tuple[RequestHits, ...]  # newest first
    policy: str = "lru"  # how the host tier evicts: "lru" or "arc" (vLLM's eviction_policy names)

    @property
    def device_free(self) -> int:
        return self.device_blocks - self.device_held

    @property
    def host_free(self) -> int:
        return self.host_blocks - self.host_held


def tier_view(engine: LLMEngine) -> TierView | None:
    """The host tier and the device pool from the engine's own counters; None without a host tier."""
    host = engine.host
    if host is None:
        return None
    hp, blocks = host.pool, engine.pool.blocks[1:]
    cached = [b.block_hash for b in blocks if b.block_hash is not None]
    return TierView(
        len(blocks), sum(1 for b in blocks if b.ref_cnt > 0 or b.block_hash is not None), len(cached),
        sum(1 for h in cached if h in hp.blocks), hp.num_blocks, len(hp.blocks), host.nbytes,
        engine.memory.k[0].device.type == "cpu", engine.num_blocks_cached - hp.num_loaded, engine.num_blocks_evicted,
        hp.num_stored, hp.num_loaded, hp.num_evicted, hp.num_skipped_stores,
        tuple(RequestHits(*r) for r in reversed(engine.recent_hits)), hp.eviction_policy,
    )


def engine_view(engine: LLMEngine, max_steps: int = 64) -> EngineView:
    pool = engine.pool
    tables = engine.block_tables()
    reqs = []
    for req in [*engine.scheduler.running, *engine.scheduler.waiting]:
        reqs.append(RequestView(req.request_id, req.status.value, req.num_prompt_tokens, req.num_computed_tokens,
                                len(req.output_token_ids), max(req.num_cached_tokens, 0), req.num_preemptions,
                                tuple(tables.get(req.request_id, ())), req.client))
    return EngineView(
        engine.num_blocks, engine.block_size, engine.kv_cache_bytes, engine.memory.block_bytes,
        tuple(b.ref_cnt for b in pool.blocks), tuple(b.block_hash is not None for b in pool.blocks),
        tuple(b.block_id for b in pool.free_block_queue), tuple(reqs), tuple(engine.steps[-max_steps:]),
        engine.stats(), tier_view(engine),
    )


#: The live view's burst (data, not UI text): four prompts share a system prompt, two do not.
BURST_SYSTEM = ("You are a patient teacher. Explain in two short sentences, with one concrete example, "
                "for a reader who has never programmed. The topic is how computers remember things.")
BURST_QUESTIONS = ("What is a cache?", "What is a hash?", "What is a queue?", "What is memory?")
BURST_OTHERS = ("Write a haiku about autumn rain.", "List three prime numbers above one hundred.")
BURST_NEW_TOKENS = 24


def burst_prompts() -> list[str]:
    return [f"{BURST_SYSTEM} {q}" for q in BURST_QUESTIONS] + list(BURST_OTHERS)
