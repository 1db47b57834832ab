"""Prompts of the "edit one character" experiment through kvviz's serving engine (``kvviz.engine``).

Each prompt is one engine request (``max_tokens=1``: its prefill and the next token). What a request
reused is the engine's own count (``RequestOutput.num_cached_tokens``) and its block table is read back
from the mirror manager's event log (its ``hit`` and ``allocate`` events), so B's table shows A's physical
block ids where the engine shared them. Compute and waiting are separate: the time from the request's
first scheduled step to its first token is compute (its step's forward pass), arrival to first scheduled
is waiting.

Which engine: the process-wide one (``get_engine_loop``) when the page's block size, hash and seed are
its own; otherwise one engine of those settings over the same loaded model, created on demand (an
engine's block size and hash are fixed when it starts, as vLLM's ``--block-size``), the last one kept.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from kvviz.mirror.events import EventKind
from kvviz.mirror.hashing import DEFAULT_SEED
from kvviz.settings import kv_cache_bytes_default

if TYPE_CHECKING:  # types only: no torch or engine import at run time
    from kvviz.engine import EngineLoop, LLMEngine
    from kvviz.model.loader import LoadedModel

#: K/V memory of an engine started for page settings other than the process-wide engine's.
SIDE_ENGINE_SHARE = 2  # half the configured budget


@dataclass(frozen=True)
class EngineRequestRun:
    """One prompt through the engine: its tokens reused from the cache, its block table, its times."""

    request_id: str
    num_prompt_tokens: int
    num_cached_tokens: int
    block_ids: tuple[int, ...]
    compute_ms: float  # first scheduled step -> first token
    wait_ms: float  # arrival -> first scheduled step
    next_token_id: int
    logits: np.ndarray | None = field(default=None, repr=False, compare=False)  # [vocab] float32

    @property
    def num_computed_tokens(self) -> int:
        return self.num_prompt_tokens - self.num_cached_tokens


@dataclass(frozen=True)
class EngineInfo:
    """Which engine ran the prompts and its sizes (plain data for the page and the CLI)."""

    shared: bool  # True: the process-wide engine every page and the API use
    block_size: int
    hash_name: str
    num_blocks: int
    kv_cache_bytes: int
    kv_cache_usage: float
    prefix_cache_queries: int
    prefix_cache_hits: int


_SIDE: dict[tuple, EngineLoop] = {}
_SIDE_LOCK = threading.Lock()


def _settings_of(engine: LLMEngine) -> tuple[int, str, str | None]:
    c = engine.config
    return c.block_size, c.hash_name, c.hash_seed


def get_edit_engine_loop(lm: LoadedModel, block_size: int, hash_name: str,
                         seed: str | None = DEFAULT_SEED) -> tuple[EngineLoop, bool]:
    """The engine loop whose block size, hash and NONE_HASH seed are these: the process-wide one when
    they match it (and ``lm`` is its model), else a page engine over ``lm`` (one kept; the previous is
    closed). Returns ``(loop, shared)``."""
    from kvviz.engine import EngineConfig, EngineLoop, LLMEngine, get_engine_loop

    main = get_engine_loop()
    wanted = (int(block_size), hash_name, seed or None)
    if main.engine.lm is lm and _settings_of(main.engine) == wanted:
        return main, True
    key = (id(lm),) + wanted
    with _SIDE_LOCK:
        loop = _SIDE.get(key)
        if loop is None:
            for old in list(_SIDE.values()):
                old.close()
            _SIDE.clear()
            config = EngineConfig(block_size=wanted[0], hash_name=hash_name, hash_seed=wanted[2],
                                  kv_cache_bytes=kv_cache_bytes_default() // SIDE_ENGINE_SHARE)
            loop = EngineLoop(LLMEngine(lm, config))
            _SIDE[key] = loop
    return loop, False


def engine_info(loop: EngineLoop, shared: bool) -> EngineInfo:
    s = loop.stats()
    return EngineInfo(shared, s.block_size, loop.engine.config.hash_name, s.num_blocks, s.kv_cache_bytes,
                      s.kv_cache_usage, s.prefix_cache_queries, s.prefix_cache_hits)


def salt_for(*parts: object) -> str:
    """A cache salt derived from ``parts`` (same parts, same salt: the engine can reuse what they cached)."""
    digest = hashlib.sha256(repr(parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]
    return f"kvviz-edit-{digest}"


def fresh_salt() -> str:
    """A salt no request used before: under it nothing is cached, so the prompt is computed in full."""
    return f"kvviz-edit-fresh-{uuid.uuid4().hex}"


def _next_seq(engine: LLMEngine) -> int:
    return engine.events[-1].seq + 1 if engine.events else 0


def _block_table(engine: LLMEngine, request_id: str, since_seq: int) -> tuple[int, ...]:
    """The request's block table from its ``hit`` and ``allocate`` events (its last admission)."""
    mine = []
    for event in reversed(engine.events):
        if event.seq < since_seq:
            break
        if event.request_id == request_id:
            mine.append(event)
    table: dict[int, int] = {}
    after_hit = False
    for event in reversed(mine):
        if event.kind is EventKind.HIT:
            table, after_hit = dict(zip(event.positions, event.block_ids, strict=False)), True
        elif event.kind is EventKind.MISS:
            if not after_hit:
                table = {}
            after_hit = False
        elif event.kind is EventKind.ALLOCATE:
            table.update(zip(event.positions, event.block_ids, strict=False))
    return tuple(table[i] for i in sorted(table))


def run_prompt(loop: EngineLoop, ids: list[int], cache_salt: str | None, *, logits: bool = False,
               block_table: bool = False) -> EngineRequestRun:
    """Prefill ``ids`` as one engine request under ``cache_salt`` and wait for its first token."""
    from kvviz.engine import SamplingParams

    request_id = f"edit-{uuid.uuid4().hex[:12]}"
    since = loop.read(_next_seq) if block_table else 0
    out = loop.submit(request_id, list(ids), SamplingParams(max_tokens=1, return_logits=logits),
                      cache_salt=cache_salt, client="edit").result()
    table = loop.read(lambda e: _block_table(e, request_id, since)) if block_table else ()
    m = out.metrics
    first = m.first_scheduled_time if m.first_scheduled_time is not None else m.arrival_time
    token_time = m.first_token_time if m.first_token_time is not None else first
    return EngineRequestRun(
        request_id=request_id,
        num_prompt_tokens=out.num_prompt_tokens,
        num_cached_tokens=out.num_cached_tokens,
        block_ids=table,
        compute_ms=(token_time - first) * 1000.0,
        wait_ms=(first - m.arrival_time) * 1000.0,
        next_token_id=out.token_ids[0] if out.token_ids else -1,
        logits=None if out.logits is None else out.logits.numpy().astype(np.float32, copy=True),
    )
