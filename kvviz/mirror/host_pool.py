"""The host tier's bookkeeping, pure Python: a second block store under the device pool, as vLLM 0.33.0's
native CPU offloading (``vllm/v1/kv_offload/cpu/manager.py``, ``cpu/policies/lru.py``, and the
``OffloadingConnector``'s scheduler side, ``distributed/kv_transfer/kv_connector/v1/offloading/scheduler.py``).

One home for every rule of the tier, shared by the engine (``kvviz.engine.offload``, which adds the K/V
tensors) and the mirror's ``KVCacheManager`` (the block-table page):

- **store** (``store_span``, ``HostBlockPool.prepare_store``): write-through; a request's full blocks
  computed since its last offer are offered (all of them again on admission, as vLLM restarts its store
  index there); a held block is only touched; the new ones get slots, evicting unpinned least recently
  used blocks outside the offer; a store that cannot evict enough is skipped whole.
- **lookup** (``load_span``, ``HostBlockPool.lookup``): after the device prefix hit, the run of following
  full blocks the tier holds, leaving at least one prompt token to compute.
- **recency** (``touch``): the last of a group first, so a request's head outlives its tail.
- **eviction policy** (``eviction_policy``, vLLM's names): ``"lru"`` (the default) evicts the least recently
  used unpinned block; ``"arc"`` is ``kvviz.mirror.host_arc``'s ARC, fed what each request reused and stored
  (``request=`` on loads and stores) and applied when it finishes (``finish_request``).

Invariant (``check_invariants``): every slot is free or holds exactly one block hash; between steps no
block is pinned (ref_cnt 0) and none is pending; free + held = capacity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import islice

from kvviz.mirror.hashing import BlockHash
from kvviz.mirror.host_arc import EVICTION_POLICIES, ArcLists, RequestAccess
from kvviz.mirror.kv_events import MEDIUM_CPU, BlockRemoved, BlockStored, KVCacheEvent


@dataclass(frozen=True)
class RequestHits:
    """One admitted prompt by where its tokens came from: the device pool's prefix hit, the host tier (copied
    back), and the rest computed (``device + host + computed == prompt``); ``client``: who sent it (the engine's
    requests; "" in a scenario). The engine's recent requests and the block-table scenarios both report these."""

    request_id: str
    client: str
    prompt: int
    device: int
    host: int

    @property
    def computed(self) -> int:
        return self.prompt - self.device - self.host

    def to_dict(self) -> dict[str, int | str]:
        return {"request_id": self.request_id, "prompt_tokens": self.prompt, "device": self.device,
                "host": self.host, "computed": self.computed}



@dataclass
class HostBlock:
    """One host slot's block: ``ref_cnt`` -1 while its store is in flight, 0 evictable, > 0 pinned by loads."""

    slot: int
    ref_cnt: int = -1


@dataclass(frozen=True)
class StoreMeta:
    """What a host ``BlockStored`` event says of one block: its parent hash and its tokens."""

    parent: BlockHash | None
    token_ids: tuple[int, ...]


def store_span(admitted: bool, next_store: int, num_computed: int, num_blocks: int,
               block_size: int) -> tuple[int, int]:
    """The logical blocks ``[start, end)`` to offer after a step: from the request's next offer index (0 on
    admission: vLLM restarts it there) to its last full computed block (at most its ``num_blocks``)."""
    start = 0 if admitted else next_store
    return start, min(num_computed // block_size, num_blocks)


def load_span(num_local_tokens: int, num_tokens: int, num_hashes: int, block_size: int) -> tuple[int, int]:
    """The logical blocks ``[first, last)`` to look up in the host tier: from the end of the device hit to the
    last full block that still leaves one prompt token to compute (vLLM's ``get_num_new_matched_tokens``)."""
    return num_local_tokens // block_size, min(num_hashes, (num_tokens - 1) // block_size)


def store_metas(hashes: Sequence[BlockHash], token_ids: Sequence[int], start: int, end: int,
                block_size: int) -> list[StoreMeta]:
    """Each offered block's parent hash and tokens, for blocks ``start..end-1`` of a request's chain."""
    return [StoreMeta(hashes[i - 1] if i else None, tuple(token_ids[i * block_size:(i + 1) * block_size]))
            for i in range(start, end)]


class HostBlockPool:
    """Block hash -> slot, LRU order (oldest first), pins, and vLLM's KV events for the tier (``medium``
    "CPU"). No tensors: the engine's ``HostTier`` copies K/V into the slots this pool hands out."""

    def __init__(self, num_blocks: int, block_size: int, eviction_policy: str = "lru") -> None:
        if isinstance(num_blocks, bool) or not isinstance(num_blocks, int) or num_blocks < 1:
            raise ValueError(f"a host tier needs at least one block, got {num_blocks!r}")
        if eviction_policy not in EVICTION_POLICIES:
            raise ValueError(f"eviction policy must be one of {', '.join(EVICTION_POLICIES)}, got {eviction_policy!r}")
        self.eviction_policy = eviction_policy
        self.arc = ArcLists(num_blocks) if eviction_policy == "arc" else None
        self._access: dict[str, RequestAccess] = {}  # ARC: each running request's accesses until it finishes
        self.num_blocks, self.block_size = num_blocks, block_size
        self.blocks: OrderedDict[BlockHash, HostBlock] = OrderedDict()  # least recently used first
        self._free_slots: list[int] = list(range(num_blocks - 1, -1, -1))
        self._pending_meta: dict[BlockHash, StoreMeta] = {}
        self.events: list[KVCacheEvent] = []
        self.num_stored = self.num_loaded = self.num_evicted = self.num_skipped_stores = 0

    # -- lookup and load ------------------------------------------------------------------------
    def lookup(self, hashes: Sequence[BlockHash]) -> int:
        """How many of ``hashes``, from the first, are held and ready (vLLM's ``lookup`` per key, stopping at
        the first miss)."""
        n = 0
        for h in hashes:
            b = self.blocks.get(h)
            if b is None or b.ref_cnt < 0:
                break
            n += 1
        return n

    def prepare_load(self, hashes: Sequence[BlockHash], request: str | None = None, first: int = 0) -> list[int]:
        """Pin held blocks for a load (not evictable until ``complete_load``); their slots, in order. ARC
        counts them as reused by ``request`` (logical blocks ``first`` on)."""
        slots = []
        for h in hashes:
            b = self.blocks[h]
            if b.ref_cnt < 0:
                raise ValueError("a block whose store is in flight cannot be loaded")
            b.ref_cnt += 1
            slots.append(b.slot)
        if self.arc is None:
            self.touch(hashes)
        elif request is not None:
            self._access.setdefault(request, RequestAccess()).see(hashes, first, reused=hashes)
        return slots

    def complete_load(self, hashes: Sequence[BlockHash]) -> None:
        for h in hashes:
            b = self.blocks[h]
            if b.ref_cnt <= 0:
                raise ValueError("complete_load of a block that was not pinned")
            b.ref_cnt -= 1
        self.num_loaded += len(hashes)

    def touch(self, hashes: Sequence[BlockHash]) -> None:
        """LRU: mark held blocks most recently used, the last of ``hashes`` first: a request's head outlives
        its tail (vLLM's LRU ``touch`` walks the keys in reverse). ARC orders at a request's finish instead."""
        if self.arc is not None:
            return
        for h in reversed(list(hashes)):
            if h in self.blocks:
                self.blocks.move_to_end(h)

    # -- store ----------------------------------------------------------------------------------
    def victims(self, need: int, offer: Sequence[BlockHash]) -> list[BlockHash]:
        """Up to ``need`` evictable blocks (unpinned, none of ``offer``) in the policy's order: LRU's least
        recently used first; ARC's choice, or none when it cannot find ``need``."""
        keep = set(offer)
        if self.arc is not None:
            chosen = self.arc.choose(need, lambda h: self.blocks[h].ref_cnt == 0 and h not in keep)
            return [h for h, _ in chosen or ()]
        return list(islice((h for h, b in self.blocks.items() if b.ref_cnt == 0 and h not in keep), need))

    def drop(self, hashes: Sequence[BlockHash]) -> list[int]:
        """Evict held, unpinned blocks: their slots return to the free list; one ``BlockRemoved`` (medium
        CPU). Returns the freed slots, in order."""
        for h in hashes:
            b = self.blocks.get(h)
            if b is None or b.ref_cnt != 0:
                raise ValueError("only a held, unpinned block can be evicted from the host tier")
        slots = [self.blocks.pop(h).slot for h in hashes]
        if self.arc is not None:
            for h in hashes:
                self.arc.evict(h)
        self._free_slots.extend(slots)
        if hashes:
            self.num_evicted += len(hashes)
            self.events.append(BlockRemoved(block_hashes=list(hashes), medium=MEDIUM_CPU))
        return slots

    def prepare_store(self, hashes: Sequence[BlockHash], metas: Sequence[StoreMeta], request: str | None = None,
                      first: int = 0) -> list[tuple[BlockHash, int]] | None:
        """Offer a request's blocks (logical ``first`` on): held ones are touched (ARC: counted as reused by
        ``request``), the others get slots (evicting unpinned blocks not in this offer, by the policy). None,
        and nothing stored, when too few can be evicted."""
        new = [(h, m) for h, m in zip(hashes, metas, strict=True) if h not in self.blocks]
        held = [h for h in hashes if h in self.blocks]
        self.touch(held)
        if self.arc is not None and request is not None:  # before the eviction, as vLLM's prepare_store
            access = self._access.setdefault(request, RequestAccess())
            misses = [h for h, _ in new if h not in access.store_misses]
            self.arc.store_misses(misses)
            access.store_misses.update(misses)
            access.see(hashes, first, reused=[h for h in held if self.blocks[h].ref_cnt >= 0])
        if not new:
            return []
        need = len(new) - len(self._free_slots)
        if need > 0:
            victims = self.victims(need, hashes)
            if len(victims) < need:
                self.num_skipped_stores += 1
                return None
            self.drop(victims)
        out = []
        for h, meta in new:  # insertion order = the request's order; touch below puts its head last
            slot = self._free_slots.pop()
            self.blocks[h] = HostBlock(slot)
            self._pending_meta[h] = meta
            if self.arc is not None:
                self.arc.insert(h)
            out.append((h, slot))
        self.touch([h for h, _ in new])
        if self.arc is not None and request is not None:
            self._access[request].inserted.update(h for h, _ in new)
        return out

    def finish_request(self, request: str) -> None:
        """``request`` finished (or was aborted): ARC applies what it reused and stored (vLLM's
        ``on_request_finished``); LRU has nothing to do."""
        access = self._access.pop(request, None)
        if self.arc is not None and access is not None:
            self.arc.finish(access.head_to_tail(), access.inserted - access.reused, access.reused)

    def complete_store(self, hashes: Sequence[BlockHash]) -> None:
        """The copies landed: the blocks become ready and evictable; a ``BlockStored`` (medium CPU) each."""
        metas = []
        for h in hashes:
            b = self.blocks[h]
            if b.ref_cnt != -1:
                raise ValueError("complete_store of a block that is not pending")
            b.ref_cnt = 0
            metas.append(self._pending_meta.pop(h))
        if not hashes:
            return
        self.num_stored += len(hashes)
        # one event per block with its own parent, as vLLM's offloading events (a store may skip held blocks,
        # so the stored ones need not form a chain)
        self.events.extend(BlockStored(block_hashes=[h], parent_block_hash=m.parent, token_ids=list(m.token_ids),
                                       block_size=self.block_size, medium=MEDIUM_CPU, group_idx=0)
                           for h, m in zip(hashes, metas, strict=True))

    # -- whole tier -----------------------------------------------------------------------------
    def reset(self) -> None:
        """Drop every block (vLLM's ``reset_cache``: with the device prefix cache reset)."""
        self.blocks.clear()
        self._pending_meta.clear()
        self._access.clear()
        if self.arc is not None:
            self.arc.clear()
        self._free_slots = list(range(self.num_blocks - 1, -1, -1))

    def take_events(self) -> list[KVCacheEvent]:
        events, self.events = self.events, []
        return events

    @property
    def num_free(self) -> int:
        return len(self._free_slots)

    def usage(self) -> float:
        """Held blocks / capacity."""
        return len(self.blocks) / self.num_blocks

    def lru_order(self) -> tuple[tuple[BlockHash, int], ...]:
        """(hash, slot) of every held block, least recently used (the next to evict) first; ARC: T1's, then
        T2's."""
        order = self.arc.order() if self.arc is not None else self.blocks
        return tuple((h, self.blocks[h].slot) for h in order)

    def check_invariants(self) -> None:
        """Between steps: slots unique and within range, free + held = capacity, nothing pinned or pending."""
        slots = [b.slot for b in self.blocks.values()]
        every = slots + self._free_slots
        assert len(set(every)) == len(every) == self.num_blocks, "host slots lost or shared"
        assert all(0 <= s < self.num_blocks for s in every)
        assert all(b.ref_cnt == 0 for b in self.blocks.values()), "a host block pinned or pending between steps"
        assert not self._pending_meta
        if self.arc is not None:
            self.arc.check(set(self.blocks))


__all__ = ["HostBlock", "HostBlockPool", "StoreMeta", "load_span", "store_metas", "store_span"]
