"""EngineView: one consistent snapshot of the running engine for the live view (pure records, no torch):
requests with their block tables, the free queue head to tail, ref_cnt and cached state per block, the
step timeline and the counters. Taken between steps (``EngineLoop.call(engine_view)``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.engine.engine import LLMEngine
from kvviz.engine.request import EngineStats
from kvviz.engine.steps import StepRecord


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
        engine.stats(),
    )


#: The live view's burst (data, not UI text): four prompts share a system prompt, two do not.
BURST_SYSTEM = ("You are a patient teacher. Explain in two short sentences, with one concrete example, "
                "for a reader who has never programmed. The topic is how computers remember things.")
BURST_QUESTIONS = ("What is a cache?", "What is a hash?", "What is a queue?", "What is memory?")
BURST_OTHERS = ("Write a haiku about autumn rain.", "List three prime numbers above one hundred.")
BURST_NEW_TOKENS = 24


def burst_prompts() -> list[str]:
    return [f"{BURST_SYSTEM} {q}" for q in BURST_QUESTIONS] + list(BURST_OTHERS)
