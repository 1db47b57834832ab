"""The KV-cache manager: prefix-cache lookup, allocation, decode appends and freeing, with vLLM v1
semantics (``kv_cache_manager.py``, ``single_type_kv_cache_manager.py``).

Per request it keeps the token ids, the chained hashes of its full blocks and its block table
(logical block -> physical block). ``add_request`` = ``get_computed_blocks`` (longest run of cached
hashes from the start, capped at ``num_tokens - 1`` tokens) followed by ``allocate_slots`` (touch
the hits, pop new blocks, cache the newly full ones). A request that does not fit is refused with
the pool left unchanged. Every change is an ``Event`` in ``self.events`` (a reason code and its
parameters; ``kvviz_app.shell.text_concepts`` renders the words). ``reset_prefix_cache`` drops every hash when no
block is in use. Block 0 is the null block, as in vLLM. ``host_blocks`` adds a host tier under the pool
(``kvviz.mirror.offloading``, vLLM's CPU offloading): full blocks are stored there as they are computed, and a
prompt loads the run of blocks after its device hit that the tier still holds instead of computing them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from kvviz.errors import CodedError
from kvviz.mirror.block_pool import BlockPool, KVCacheBlock
from kvviz.mirror.events import BlockTableEntry, Event, EventKind, PoolCounters, PoolState, RequestBlocks
from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_SEED,
    BlockHash,
    generate_block_hash_extra_keys,
    get_hash_fn,
    hash_block_chain,
    init_none_hash,
    resolve_none_hash_seed,
    validate_token_ids,
)
from kvviz.mirror.kv_events import SPEC_FULL_ATTENTION, SPEC_SLIDING_WINDOW
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE, BlockSize
from kvviz.mirror.offloading import HostOffload
from kvviz.mirror.replay import replay as replay_events
from kvviz.mirror.single_type import (
    CacheHit,
    cdiv,
    find_longest_cache_hit,
    find_longest_cache_hit_sliding_window,
)

MAX_NUM_BLOCKS = 65536

@dataclass(frozen=True)
class AddResult:
    """Outcome of one manager step (``add``, ``append`` or ``free``). ``ok`` is False for a refused
    step, with ``error`` saying why; ``events`` are the events this step appended."""

    op: str
    request_id: str
    ok: bool
    num_tokens: int
    num_computed_tokens: int
    hit_block_ids: tuple[int, ...] = ()
    new_block_ids: tuple[int, ...] = ()
    evicted_block_ids: tuple[int, ...] = ()
    cached_block_ids: tuple[int, ...] = ()
    freed_block_ids: tuple[int, ...] = ()
    error: str | None = None
    events: tuple[Event, ...] = ()




@dataclass
class _Request:
    request_id: str
    token_ids: list[int]
    cache_salt: str | None
    block_hashes: list[BlockHash] = field(default_factory=list)
    blocks: list[KVCacheBlock | None] = field(default_factory=list)
    num_cached_blocks: int = 0


class KVCacheManager:
    """Prefix-caching block manager over a ``BlockPool`` of ``num_blocks`` blocks.

    ``sliding_window`` (tokens, >= 2) switches the hit search to vLLM's sliding-window variant and
    frees blocks that fall out of the window as decoding proceeds, as ``SlidingWindowManager`` does.
    ``host_blocks`` (>= 1, full attention only) puts a host tier of that many blocks under the pool, evicting
    by ``host_eviction_policy`` ("lru" or "arc", vLLM's offloading ``eviction_policy``).
    """

    def __init__(
        self,
        num_blocks: int,
        block_size: BlockSize = DEFAULT_BLOCK_SIZE,
        hash_name: str = DEFAULT_HASH,
        seed: str | None = DEFAULT_SEED,
        sliding_window: int | None = None,
        host_blocks: int | None = None,
        host_eviction_policy: str = "lru",
    ) -> None:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or not 2 <= num_blocks <= MAX_NUM_BLOCKS:
            raise ValueError(f"num_blocks must be an integer in 2..{MAX_NUM_BLOCKS} (block 0 is the null block), "
                             f"got {num_blocks!r}")
        self.block_size = block_size  # a BlockSize, checked at the edge
        self.hash_name = hash_name
        self.hash_fn = get_hash_fn(hash_name)
        self.seed = seed
        # The NONE_HASH seed in force and why (explicit / vllm-none-hash / random per process).
        self.seed_in_force, self.seed_reason = resolve_none_hash_seed(hash_name, seed)
        self.none_hash = init_none_hash(self.hash_fn, self.seed_in_force)
        if sliding_window is not None and (
            isinstance(sliding_window, bool) or not isinstance(sliding_window, int) or sliding_window < 2
        ):
            raise ValueError(f"sliding_window must be an integer >= 2 or None, got {sliding_window!r}")
        self.sliding_window = sliding_window
        self.events: list[Event] = []
        self.block_pool = BlockPool(num_blocks, events=self.events, block_size=self.block_size,
                                    kv_cache_spec_kind=SPEC_FULL_ATTENTION if sliding_window is None
                                    else SPEC_SLIDING_WINDOW, sliding_window=sliding_window)
        if host_blocks is not None and sliding_window is not None:
            raise ValueError("a host tier is mirrored for full attention only")
        self.host = (HostOffload(host_blocks, self.block_pool, host_eviction_policy) if host_blocks is not None
                     else None)
        self._requests: dict[str, _Request] = {}
        self._requests_added = 0
        self._host_hit_tokens = 0
        self._prompt_tokens = 0
        self._hit_tokens = 0
        self._computed_tokens = 0
        self._refused = 0

    # -- hashing and lookup -------------------------------------------------------------------
    @property
    def num_blocks(self) -> int:
        return self.block_pool.num_blocks

    @property
    def request_ids(self) -> list[str]:
        return list(self._requests)

    def request_block_hashes(self, token_ids: Sequence[int], cache_salt: str | None = None) -> list[BlockHash]:
        """Chained hashes of the full blocks of ``token_ids`` under this manager's settings."""
        return hash_block_chain(token_ids, self.block_size, self.hash_fn, self.none_hash, cache_salt)

    def _find_hit(self, block_hashes: Sequence[BlockHash], max_length: int,
                  sliding_window: int | None) -> list[KVCacheBlock | None]:
        lookup = self.block_pool.get_cached_block
        if sliding_window is None:
            return list(find_longest_cache_hit(block_hashes, max_length, self.block_size, lookup))
        return find_longest_cache_hit_sliding_window(
            block_hashes, max_length, self.block_size, sliding_window, lookup
        )

    def peek_cache_hit(
        self, token_ids: Sequence[int], cache_salt: str | None = None, *,
        sliding_window: int | None | str = "default", cap: bool = True,
        block_hashes: Sequence[BlockHash] | None = None,
    ) -> CacheHit:
        """What ``add_request`` would reuse now, without changing anything or recording events.
        ``sliding_window`` overrides the manager's (None = full attention); ``cap=False`` drops the
        ``num_tokens - 1`` cap to show the raw longest match. ``block_hashes``: the chain of these
        tokens already computed by ``request_block_hashes`` (an engine hashes a prompt once)."""
        tokens = validate_token_ids(token_ids)
        window = self.sliding_window if sliding_window == "default" else sliding_window
        hashes = self._hashes_of(tokens, cache_salt, block_hashes)
        max_length = len(tokens) - 1 if cap else len(tokens)
        hit = self._find_hit(hashes, max_length, window)  # type: ignore[arg-type]
        return CacheHit(
            tuple(b.block_id if b is not None else None for b in hit),
            len(hit) * self.block_size,
            tuple(hashes),
        )

    def _num_skipped_blocks(self, num_computed_tokens: int) -> int:
        if self.sliding_window is None:
            return 0
        return max(0, num_computed_tokens - self.sliding_window + 1) // self.block_size

    # -- steps --------------------------------------------------------------------------------
    def _check_new_id(self, request_id: str) -> None:
        if not isinstance(request_id, str) or not request_id:
            raise CodedError(f"request id must be a non-empty string, got {request_id!r}", "bad_request_id",
                             got=repr(request_id)[:40])
        if request_id in self._requests:
            raise CodedError(f"request {request_id!r} is already running", "request_running", id=request_id)

    def _get(self, request_id: str) -> _Request:
        try:
            return self._requests[request_id]
        except (KeyError, TypeError):
            raise CodedError(f"unknown request {request_id!r}", "unknown_request", id=str(request_id)) from None

    def _refuse(self, op: str, request_id: str, needed: int, num_tokens: int, computed: int,
                available: int | None = None) -> AddResult:
        free = self.block_pool.get_num_free_blocks() if available is None else available
        event = self.block_pool.emit(EventKind.REFUSE, request_id, (), "refuse", {"needed": needed, "free": free},
                                     num_tokens=num_tokens)
        self._refused += 1
        return AddResult(op, request_id, False, num_tokens, computed, error="refuse", events=(event,))

    def _hashes_of(self, tokens: Sequence[int], cache_salt: str | None,
                   block_hashes: Sequence[BlockHash] | None) -> list[BlockHash]:
        """The chain of ``tokens``' full blocks: the given precomputed chain (of these tokens or a longer
        sequence they start) cut to their full blocks, else hashed here."""
        if block_hashes is None:
            return self.request_block_hashes(tokens, cache_salt)
        num_full = len(tokens) // self.block_size
        if len(block_hashes) < num_full:
            raise ValueError(f"need {num_full} block hashes, got {len(block_hashes)}")
        return list(block_hashes[:num_full])

    def add_request(self, request_id: str, token_ids: Sequence[int], cache_salt: str | None = None, *,
                    block_hashes: Sequence[BlockHash] | None = None,
                    full_num_tokens: int | None = None, skip_reading_prefix_cache: bool = False) -> AddResult:
        """Admit a prompt whose prefill is about to run: reuse the longest cached prefix (capped at
        ``num_tokens - 1`` tokens), allocate blocks for the rest, cache its full blocks. An engine with
        chunked prefill admits the tokens of the first chunk (and ``append_tokens`` the later ones), so
        only blocks whose K/V are computed in this step or before are cached (vLLM's ``allocate_slots``);
        ``block_hashes`` as in ``peek_cache_hit``. ``full_num_tokens`` (the request's whole current length,
        >= the chunk's): refused unless blocks for all of them, less the hit, are free now (vLLM 0.33.0's
        ``allocate_slots(full_sequence_must_fit=True)``); only the chunk's blocks are allocated.
        ``skip_reading_prefix_cache``: no lookup (device or host tier), every block is computed (vLLM 0.33.0's
        ``KVCacheManager.prefix_cache_lookup_enabled``); its full blocks are cached all the same."""
        self._check_new_id(request_id)
        if cache_salt is not None and not isinstance(cache_salt, str):
            raise ValueError(f"cache salt must be a string, got {type(cache_salt).__name__}")
        tokens = list(validate_token_ids(token_ids))
        num_tokens = len(tokens)
        self._check_full_num_tokens(full_num_tokens, num_tokens)
        bs = self.block_size
        hashes = self._hashes_of(tokens, cache_salt, block_hashes)
        computed = [] if skip_reading_prefix_cache else self._find_hit(hashes, num_tokens - 1, self.sliding_window)
        num_computed = len(computed) * bs
        skipped = self._num_skipped_blocks(num_computed)
        reused = [b for b in computed[skipped:] if b is not None]
        in_queue = sum(1 for b in reused if b.ref_cnt == 0)  # a free cached hit block leaves the free queue
        num_new = max(cdiv(num_tokens, bs) - max(skipped, len(computed)), 0)
        needed = num_new + in_queue
        if full_num_tokens is not None:  # the whole sequence first, as vLLM checks it before the chunk
            whole = max(cdiv(full_num_tokens, bs) - len(computed), 0) + in_queue
            if whole > self.block_pool.get_num_free_blocks():
                return self._refuse("add", request_id, whole, full_num_tokens, num_computed)
        if needed > self.block_pool.get_num_free_blocks():
            return self._refuse("add", request_id, needed, num_tokens, num_computed)

        first_event = len(self.events)
        pool = self.block_pool
        reused_pos = [i for i in range(skipped, len(computed)) if computed[i] is not None]
        if num_computed:
            pool.emit(EventKind.HIT, request_id, reused, "hit", {"count": len(reused), "tokens": num_computed},
                      num_tokens=num_computed, positions=reused_pos)
        to_compute = num_tokens - num_computed
        from_host = (self.host.lookup(hashes, num_computed, num_tokens)
                     if self.host is not None and not skip_reading_prefix_cache else [])
        loaded = len(from_host) * bs
        if from_host:
            miss_code, miss_params = "miss_host", {"tokens": to_compute - loaded, "loaded": loaded,
                                                   "index": len(computed) + len(from_host)}
        elif len(computed) < len(hashes) and pool.get_cached_block(hashes[len(computed)]) is not None:
            miss_code, miss_params = "miss_capped", {"tokens": to_compute}
        else:
            miss_code, miss_params = "miss", {"tokens": to_compute, "index": len(computed)}
        pool.emit(EventKind.MISS, request_id, (), miss_code, miss_params, hashes=hashes[len(computed):],
                  num_tokens=to_compute)
        self._requests_added += 1
        self._prompt_tokens += num_tokens
        self._hit_tokens += num_computed
        self._host_hit_tokens += loaded
        self._computed_tokens += to_compute - loaded

        req = _Request(request_id, tokens, cache_salt, hashes)
        pool.touch(reused, request_id, positions=reused_pos)
        req.blocks = [None] * skipped + list(computed[skipped:])
        req.num_cached_blocks = len(req.blocks)
        self._requests[request_id] = req
        start = len(req.blocks)
        new_blocks = pool.get_new_blocks(num_new, request_id, positions=range(start, start + num_new),
                                         num_tokens=num_tokens)
        req.blocks.extend(new_blocks)
        if from_host:  # vLLM copies them into the request's fresh blocks; they are cached like computed ones
            self.host.load(request_id, new_blocks[:len(from_host)], from_host, start)  # type: ignore[union-attr]
        cached = self._cache_blocks(req)
        if self.host is not None:
            self.host.offer(request_id, True, req.blocks, req.block_hashes, req.token_ids)
        events = tuple(self.events[first_event:])
        return AddResult(
            "add", request_id, True, num_tokens, num_computed,
            hit_block_ids=tuple(b.block_id for b in reused),
            new_block_ids=tuple(b.block_id for b in new_blocks),
            evicted_block_ids=_evicted(events),
            cached_block_ids=tuple(b.block_id for b in cached),
            events=events,
        )

    def _check_full_num_tokens(self, full_num_tokens: int | None, num_tokens: int) -> None:
        if full_num_tokens is None:
            return
        if isinstance(full_num_tokens, bool) or not isinstance(full_num_tokens, int) or full_num_tokens < num_tokens:
            raise ValueError(f"full_num_tokens must be an integer >= the {num_tokens} tokens admitted, "
                             f"got {full_num_tokens!r}")
        if self.sliding_window is not None:  # vLLM caps a recycling window's reservation by its scheduler budget
            raise ValueError("the whole-sequence admission check is mirrored for full attention only")

    def append_tokens(self, request_id: str, token_ids: Sequence[int]) -> AddResult:
        """Decoded tokens: grow the last block, pop a new block when it is full, cache each block
        as it fills. With a sliding window, blocks that left the window are freed first."""
        req = self._get(request_id)
        new_tokens = validate_token_ids(token_ids)
        bs = self.block_size
        prev = len(req.token_ids)
        total = prev + len(new_tokens)
        skipped = self._num_skipped_blocks(prev)
        to_skip = []
        for i in range(min(skipped, len(req.blocks)) - 1, -1, -1):
            if req.blocks[i] is None:
                break
            to_skip.append(i)
        released = sum(1 for i in to_skip if req.blocks[i].ref_cnt == 1)  # type: ignore[union-attr]
        num_new = max(cdiv(total, bs) - len(req.blocks), 0)
        if num_new > self.block_pool.get_num_free_blocks() + released:
            return self._refuse("append", request_id, num_new, total, prev,
                                available=self.block_pool.get_num_free_blocks() + released)

        first_event = len(self.events)
        pool = self.block_pool
        if to_skip:
            out = [req.blocks[i] for i in to_skip]
            for i in to_skip:
                req.blocks[i] = None
            pool.free_blocks(out, request_id, positions=to_skip, code="free_window")  # type: ignore[arg-type]
        req.token_ids.extend(new_tokens)
        if len(req.token_ids) // bs > len(req.block_hashes):
            parent = req.block_hashes[-1] if req.block_hashes else None
            req.block_hashes.extend(hash_block_chain(
                req.token_ids, bs, self.hash_fn, self.none_hash, req.cache_salt,
                start_block=len(req.block_hashes), parent_block_hash=parent,
            ))
        start = len(req.blocks)
        new_blocks = pool.get_new_blocks(num_new, request_id, positions=range(start, start + num_new),
                                         num_tokens=total)
        req.blocks.extend(new_blocks)
        self._computed_tokens += len(new_tokens)
        cached = self._cache_blocks(req)
        if self.host is not None:
            self.host.offer(request_id, False, req.blocks, req.block_hashes, req.token_ids)
        events = tuple(self.events[first_event:])
        return AddResult(
            "append", request_id, True, total, prev,
            new_block_ids=tuple(b.block_id for b in new_blocks),
            evicted_block_ids=_evicted(events),
            cached_block_ids=tuple(b.block_id for b in cached),
            freed_block_ids=tuple(b.block_id for b in out) if to_skip else (),  # type: ignore[union-attr]
            events=events,
        )

    def _cache_blocks(self, req: _Request) -> list[KVCacheBlock]:
        num_full = len(req.token_ids) // self.block_size
        # One entry per block, as vLLM's block pool builds them; only block 0 can carry a key (the salt).
        extra: list[tuple | None] = [None] * num_full
        if num_full:
            extra[0] = generate_block_hash_extra_keys(0, self.block_size, cache_salt=req.cache_salt)
        cached = self.block_pool.cache_full_blocks(
            req.blocks, req.block_hashes, req.num_cached_blocks, num_full, req.request_id,
            token_ids=req.token_ids, extra_keys=extra,
        )
        req.num_cached_blocks = max(req.num_cached_blocks, num_full)
        return cached

    def reset_prefix_cache(self) -> bool:
        """vLLM's ``reset_prefix_cache``: drop every cached hash; False (and nothing changed, a
        ``reset_refused`` event) while any request holds blocks. A host tier is cleared with it (vLLM resets
        the offloading connector's cache too)."""
        ok = self.block_pool.reset_prefix_cache()
        if ok and self.host is not None:
            self.host.reset()
        return ok

    def free_request(self, request_id: str) -> AddResult:
        """The request finished: release its blocks in reverse order, so its tail blocks are evicted
        before its head blocks; a partial (unhashed) block goes to the free-queue head."""
        req = self._get(request_id)
        first_event = len(self.events)
        order = [i for i in range(len(req.blocks) - 1, -1, -1) if req.blocks[i] is not None]
        blocks = [req.blocks[i] for i in order]
        self.block_pool.free_blocks(blocks, request_id, positions=order)  # type: ignore[arg-type]
        del self._requests[request_id]
        if self.host is not None:
            self.host.forget(request_id)
        return AddResult(
            "free", request_id, True, len(req.token_ids), 0,
            freed_block_ids=tuple(b.block_id for b in blocks),  # type: ignore[union-attr]
            events=tuple(self.events[first_event:]),
        )

    # -- views --------------------------------------------------------------------------------
    def block_table(self, request_id: str) -> list[BlockTableEntry]:
        """The request's logical blocks -> physical block ids, with the token span of each."""
        req = self._get(request_id)
        n, bs = len(req.token_ids), self.block_size
        return [
            BlockTableEntry(i, b.block_id if b is not None else None, i * bs, min((i + 1) * bs, n))
            for i, b in enumerate(req.blocks)
        ]

    def block_ids(self, request_id: str) -> list[int]:
        """The request's block table as physical block ids (0, the null block, where a sliding window
        skipped a block): what an engine's attention reads through."""
        return [b.block_id if b is not None else 0 for b in self._get(request_id).blocks]

    def num_tokens(self, request_id: str) -> int:
        """Tokens the request holds slots for (computed, or being computed in this step)."""
        return len(self._get(request_id).token_ids)

    def request_tokens(self, request_id: str) -> tuple[int, ...]:
        return tuple(self._get(request_id).token_ids)

    @property
    def counters(self) -> PoolCounters:
        return PoolCounters(
            requests=self._requests_added,
            prompt_tokens=self._prompt_tokens,
            hit_tokens=self._hit_tokens,
            computed_tokens=self._computed_tokens,
            evictions=self.block_pool.num_evictions,
            refused=self._refused,
            host_hit_tokens=self._host_hit_tokens,
        )

    def snapshot(self) -> PoolState:
        """The full state now: free queue head first, per block ref_cnt / hash / state, per-request
        block tables, counters. Equal to ``replay(num_blocks, events)``."""
        requests = {
            rid: RequestBlocks(tuple(b.block_id if b is not None else None for b in r.blocks), len(r.token_ids))
            for rid, r in self._requests.items()
        }
        return replace(self.block_pool.snapshot(), requests=requests, counters=self.counters,
                       host=self.host.state() if self.host is not None else None)

    def replay(self, k: int | None = None) -> PoolState:
        """The state after the first ``k`` events (all when None), rebuilt from the event log."""
        events = self.events if k is None else self.events[:k]
        if self.host is None:
            return replay_events(self.num_blocks, events, self.block_size)
        pool = self.host.pool
        return replay_events(self.num_blocks, events, self.block_size, pool.num_blocks, pool.eviction_policy)


def _evicted(events: Sequence[Event]) -> tuple[int, ...]:
    return tuple(bid for e in events if e.kind is EventKind.EVICT for bid in e.block_ids)
