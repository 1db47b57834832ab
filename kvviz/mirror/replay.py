"""Replay: a pool's state rebuilt from its event log (the pool changes re-performed by ``BlockPool.apply``,
request tables and counters recounted from the events). Above both events.py and block_pool.py, so neither
imports the other back."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from kvviz.mirror.block_pool import BlockPool
from kvviz.mirror.events import HOST_KINDS, Event, EventKind, PoolCounters, PoolState, RequestBlocks
from kvviz.mirror.host_pool import HostBlockPool
from kvviz.mirror.offloading import apply_host_event, host_state


def _set_positions(table: list[int | None], positions: Sequence[int], ids: Sequence[int | None]) -> None:
    for pos, bid in zip(positions, ids, strict=True):
        while len(table) <= pos:
            table.append(None)
        table[pos] = bid


def replay(num_blocks: int, events: Iterable[Event], block_size: int = 16,
           host_blocks: int | None = None, host_policy: str = "lru") -> PoolState:
    """The state after applying ``events`` in order to a fresh pool of ``num_blocks`` blocks (and a fresh
    host tier of ``host_blocks`` blocks, if any). The pool changes are re-performed by ``BlockPool.apply``
    and the tier's by ``apply_host_event`` (the same rules that recorded them); request tables and
    counters are rebuilt here from the events."""
    pool = BlockPool(num_blocks, block_size=block_size)
    host = HostBlockPool(host_blocks, block_size, host_policy) if host_blocks is not None else None
    tables: dict[str, list[int | None]] = {}
    tokens: dict[str, int] = {}
    counts = {"requests": 0, "prompt_tokens": 0, "hit_tokens": 0, "computed_tokens": 0, "refused": 0,
              "host_hit_tokens": 0}
    n = 0
    for ev in events:
        n += 1
        pool.apply(ev)
        if host is not None and (ev.kind in HOST_KINDS or ev.kind in (EventKind.RESET, EventKind.FREE)):
            apply_host_event(host, ev)
        rid = ev.request_id
        if ev.kind is EventKind.HOST_LOAD:  # loaded, not computed
            counts["host_hit_tokens"] += ev.num_tokens
            counts["computed_tokens"] -= ev.num_tokens
        if ev.kind is EventKind.HIT:
            counts["hit_tokens"] += ev.num_tokens
            counts["prompt_tokens"] += ev.num_tokens
            tokens.setdefault(rid, ev.num_tokens)
        elif ev.kind is EventKind.MISS:
            counts["requests"] += 1
            counts["prompt_tokens"] += ev.num_tokens
        elif ev.kind in (EventKind.TOUCH, EventKind.ALLOCATE):
            _set_positions(tables.setdefault(rid, []), ev.positions, ev.block_ids)
            if ev.kind is EventKind.ALLOCATE:
                counts["computed_tokens"] += ev.num_tokens - tokens.get(rid, 0)
                tokens[rid] = ev.num_tokens
        elif ev.kind is EventKind.FREE:
            table = tables.get(rid)
            if table is not None:
                _set_positions(table, ev.positions, [None] * len(ev.positions))
                if all(b is None for b in table):
                    del tables[rid]
                    tokens.pop(rid, None)
        elif ev.kind is EventKind.REFUSE:
            counts["refused"] += 1
    state = pool.snapshot()
    return PoolState(
        num_blocks=num_blocks,
        block_size=block_size,
        ref_cnt=state.ref_cnt,
        block_hash=state.block_hash,
        free_queue=state.free_queue,
        hash_to_blocks=state.hash_to_blocks,
        requests={rid: RequestBlocks(tuple(t), tokens.get(rid, 0)) for rid, t in tables.items()},
        counters=PoolCounters(**counts, evictions=pool.num_evictions),
        num_events=n,
        host=host_state(host) if host is not None else None,
    )
