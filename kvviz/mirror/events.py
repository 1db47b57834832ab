"""Typed block-pool events and the pool state they build (``kvviz.mirror.replay`` replays them).

Every state change of the block pool and manager appends one ``Event``. Replaying the first ``k``
events from an empty pool gives exactly the state after those steps, so animations replay events and
never re-derive state. Meaning of each kind (positions are logical block indices in the request's
block table; ``num_tokens`` is 0 unless said otherwise):

- ``hit``: lookup found ``block_ids`` reusable; ``num_tokens`` = prompt tokens reused. No pool change.
- ``miss``: ``block_hashes`` = full-block hashes not reused; ``num_tokens`` = prompt tokens to compute.
- ``touch``: each block's ref_cnt + 1; one that had ref_cnt 0 leaves the free queue.
- ``evict``: cached free blocks lose their hash (and leave the hash map) as they are popped for reuse.
- ``allocate``: ``block_ids`` popped from the free queue with ref_cnt 1; ``num_tokens`` = the
  request's token count after this step (allocate with no block ids = the last block had room).
- ``cache``: full blocks get ``block_hashes`` and enter the hash -> block map.
- ``free``: each block's ref_cnt - 1; of those at 0, blocks without a hash go to the free-queue head
  and blocks with a hash to the tail, each group in event order (vLLM's ``free_blocks``).
- ``refuse``: not enough free blocks; nothing changed.
- ``reset``: ``reset_prefix_cache``: every hash dropped (code ``reset``), or refused while blocks are
  in use (code ``reset_refused``); a host tier is cleared with it.

With a host tier (``KVCacheManager(host_blocks=...)``, ``kvviz.mirror.offloading``; no device-pool change):

- ``host_load``: held host blocks copied back into the request's fresh device blocks ``block_ids`` at
  ``positions`` (``num_tokens`` = tokens loaded, not computed).
- ``host_evict``: host blocks ``block_hashes`` dropped (LRU) to make room; ``BlockRemoved`` medium CPU.
- ``host_store``: a request's full blocks offered to the host tier (``block_hashes`` / ``block_ids`` /
  ``positions`` = the whole offer, in chain order; ``params["stored"]`` the positions copied, the others
  were held and only touched; code ``host_store_skipped``: too few host blocks could be evicted, nothing
  stored); ``BlockStored`` medium CPU per stored block.

Each event carries a reason ``code`` and its ``params`` (the view renders the words; see
``kvviz_app.shell.text_concepts``) and the vLLM KV-cache events it implies (``kv_events``). Block 0 is the null block.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from kvviz.mirror.hashing import BlockHash
from kvviz.mirror.kv_events import KVCacheEvent, event_to_dict

NULL_BLOCK_ID = 0  # vLLM's null block: reserved, never allocated, never in the free queue


def usable_blocks(num_blocks: int) -> int:
    """Blocks of a pool of ``num_blocks`` that can ever be allocated: all but the null block (vLLM's
    ``BlockPool``; the one place this rule lives, for the pool, its replayed state, pages and the CLI)."""
    return num_blocks - 1


class EventKind(StrEnum):
    """What happened to the pool (see the module docstring for each kind's effect)."""

    ALLOCATE = "allocate"
    HIT = "hit"
    MISS = "miss"
    CACHE = "cache"
    TOUCH = "touch"
    FREE = "free"
    EVICT = "evict"
    REFUSE = "refuse"
    RESET = "reset"
    HOST_LOAD = "host_load"
    HOST_EVICT = "host_evict"
    HOST_STORE = "host_store"


HOST_KINDS = frozenset({EventKind.HOST_LOAD, EventKind.HOST_EVICT, EventKind.HOST_STORE})


@dataclass(frozen=True, slots=True)
class Event:
    """One recorded state change. ``seq`` is its index in the event log."""

    seq: int
    kind: EventKind
    request_id: str
    block_ids: tuple[int, ...]
    block_hashes: tuple[BlockHash | None, ...]
    code: str
    params: dict[str, Any] = field(default_factory=dict)
    num_tokens: int = 0
    positions: tuple[int, ...] = ()
    kv_events: tuple[KVCacheEvent, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (hashes as hex)."""
        return {
            "seq": self.seq,
            "kind": self.kind.value,
            "request_id": self.request_id,
            "block_ids": list(self.block_ids),
            "block_hashes": [h.hex() if h is not None else None for h in self.block_hashes],
            "code": self.code,
            "params": dict(self.params),
            "num_tokens": self.num_tokens,
            "positions": list(self.positions),
            "kv_events": [event_to_dict(e) for e in self.kv_events],
        }


@dataclass(frozen=True, slots=True)
class PoolCounters:
    """Running totals. ``prompt_tokens`` and ``hit_tokens`` are vLLM's prefix-cache ``queries`` and
    ``hits`` (tokens looked up, tokens found); ``computed_tokens`` counts prefill tokens not served by
    the cache plus decoded tokens; ``evictions`` counts cached blocks that lost their hash."""

    requests: int = 0
    prompt_tokens: int = 0
    hit_tokens: int = 0
    computed_tokens: int = 0
    evictions: int = 0
    refused: int = 0
    host_hit_tokens: int = 0  # prompt tokens copied back from a host tier instead of computed

    @property
    def queries(self) -> int:
        """vLLM's ``PrefixCacheStats.queries``: prompt tokens looked up in the prefix cache."""
        return self.prompt_tokens

    @property
    def hits(self) -> int:
        """vLLM's ``PrefixCacheStats.hits``: of those, tokens found cached."""
        return self.hit_tokens

    @property
    def hit_rate(self) -> float:
        """Share of prompt tokens served from the cache (0 when no prompt was admitted)."""
        return self.hit_tokens / self.prompt_tokens if self.prompt_tokens else 0.0


@dataclass(frozen=True, slots=True)
class BlockTableEntry:
    """Logical block ``index`` of a request: physical ``block_id`` (None = null block outside the
    sliding window) holding tokens ``[start, end)``."""

    index: int
    block_id: int | None
    start: int
    end: int


@dataclass(frozen=True, slots=True)
class RequestBlocks:
    """A running request's block table (logical -> physical id) and its token count."""

    block_ids: tuple[int | None, ...]
    num_tokens: int


@dataclass(frozen=True, slots=True)
class BlockView:
    """One physical block as drawn: ``state`` is ``null`` (block 0, reserved), ``used`` (ref_cnt > 0),
    ``cached`` (free but still holding a hash, so it can be hit until evicted) or ``free``."""

    block_id: int
    ref_cnt: int
    hash: BlockHash | None
    state: str


@dataclass(frozen=True, slots=True)
class HostState:
    """A host tier at one point: its capacity, every held block as (hash, slot) in its policy's order (LRU:
    least recently used first; ARC: T1's ``t1`` blocks, then T2's, each oldest first), the position in that
    order of the block its policy drops next (None: nothing held), and its running totals of blocks stored,
    loaded, evicted, stores skipped."""

    num_blocks: int
    lru: tuple[tuple[BlockHash, int], ...] = ()
    stored: int = 0
    loaded: int = 0
    evicted: int = 0
    skipped: int = 0
    t1: int | None = None  # ARC: how many of ``lru``'s first blocks are T1's (stored, not reused); None: LRU
    next_drop: int | None = None

    @property
    def held(self) -> frozenset[BlockHash]:
        return frozenset(h for h, _ in self.lru)

    def hash_in_slot(self) -> dict[int, BlockHash]:
        """slot -> the hash it holds (free slots absent)."""
        return {slot: h for h, slot in self.lru}


@dataclass(frozen=True)
class PoolState:
    """Complete state of a block pool and its requests at one point in the event log."""

    num_blocks: int
    block_size: int
    ref_cnt: tuple[int, ...]
    block_hash: tuple[BlockHash | None, ...]
    free_queue: tuple[int, ...]
    hash_to_blocks: dict[BlockHash, tuple[int, ...]] = field(default_factory=dict)
    requests: dict[str, RequestBlocks] = field(default_factory=dict)
    counters: PoolCounters = field(default_factory=PoolCounters)
    num_events: int = 0
    host: HostState | None = None  # the host tier under the pool; None when there is none

    def state_of(self, block_id: int) -> str:
        if block_id == NULL_BLOCK_ID:
            return "null"
        if self.ref_cnt[block_id] > 0:
            return "used"
        return "cached" if self.block_hash[block_id] is not None else "free"

    @property
    def blocks(self) -> list[BlockView]:
        return [
            BlockView(i, self.ref_cnt[i], self.block_hash[i], self.state_of(i)) for i in range(self.num_blocks)
        ]

    @property
    def cached_block_ids(self) -> list[int]:
        """Blocks that hold a hash (in use or free), ascending."""
        return [i for i, h in enumerate(self.block_hash) if h is not None]

    @property
    def shared_blocks(self) -> int:
        """Blocks referenced by more than one request (ref_cnt > 1)."""
        return sum(1 for r in self.ref_cnt if r > 1)

    @property
    def num_free(self) -> int:
        return len(self.free_queue)

    @property
    def num_usable(self) -> int:
        """Blocks that can be allocated: all but the null block."""
        return usable_blocks(self.num_blocks)

    @property
    def num_used(self) -> int:
        """Usable blocks with ref_cnt > 0 (the null block is not counted, as in vLLM's usage)."""
        return self.num_usable - len(self.free_queue)

    def block_table(self, request_id: str) -> list[BlockTableEntry]:
        """The request's logical blocks with their physical ids and token spans."""
        req = self.requests[request_id]
        bs = self.block_size
        return [
            BlockTableEntry(i, bid, i * bs, min((i + 1) * bs, req.num_tokens))
            for i, bid in enumerate(req.block_ids)
        ]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (hashes as hex)."""
        c = self.counters
        return {
            "num_blocks": self.num_blocks,
            "block_size": self.block_size,
            "free_queue": list(self.free_queue),
            "blocks": [
                {"block_id": b.block_id, "ref_cnt": b.ref_cnt, "hash": b.hash.hex() if b.hash else None,
                 "state": b.state}
                for b in self.blocks
            ],
            "requests": {
                rid: {"block_ids": list(r.block_ids), "num_tokens": r.num_tokens}
                for rid, r in self.requests.items()
            },
            "counters": {
                "requests": c.requests, "prompt_tokens": c.prompt_tokens, "hit_tokens": c.hit_tokens,
                "computed_tokens": c.computed_tokens, "evictions": c.evictions, "refused": c.refused,
                "shared_blocks": self.shared_blocks, "hit_rate": c.hit_rate,
                "queries": c.queries, "hits": c.hits,
            },
            "null_block": NULL_BLOCK_ID,
            "num_events": self.num_events,
            **({} if self.host is None else {"host": {
                "num_blocks": self.host.num_blocks, "lru": [[h.hex(), slot] for h, slot in self.host.lru],
                "stored": self.host.stored, "loaded": self.host.loaded, "evicted": self.host.evicted,
                "skipped": self.host.skipped, "host_hit_tokens": c.host_hit_tokens}}),
        }


class ReplayError(ValueError):
    """The event log is inconsistent with the state it is applied to."""
