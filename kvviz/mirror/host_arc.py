"""ARC for the host tier, as vLLM 0.33.0's ``cpu/policies/arc.py`` (``eviction_policy: "arc"`` in the
``OffloadingConnector``'s extra config) and the request bookkeeping its ``CPUOffloadingManager`` feeds it.

Four ordered lists of block hashes, least recently used first: T1 (stored, not reused since), T2 (reused by a
request), and the ghosts B1 and B2 of blocks evicted from each (hashes only, at most ``capacity`` each). A
store of a block found in a ghost list moves the target size of T1: up for B1 (recency pays), down for B2
(frequency pays). Eviction takes T1's oldest unpinned block while T1 holds at least the target, else T2's.
What a request did is applied when it finishes: blocks it reused (loaded, or offered while already held)
move to T2's most recent end, blocks it only stored to T1's, tail first so its head is the most recent.

Invariant: T1 and T2 are disjoint and hold exactly the tier's blocks; B1 and B2 are disjoint, hold none of
them, and hold at most ``capacity`` hashes each; 0 <= target <= capacity.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field

from kvviz.mirror.hashing import BlockHash

EVICTION_POLICIES = ("lru", "arc")  # vLLM 0.33.0's built-in CachePolicy names


@dataclass
class RequestAccess:
    """One request's accesses to the tier until it finishes (vLLM's ``_RequestCacheAccess``): the first
    position each hash was seen at, hashes it inserted, ready hashes it reused, store misses already
    reported to the policy."""

    positions: dict[BlockHash, int] = field(default_factory=dict)
    inserted: set[BlockHash] = field(default_factory=set)
    reused: set[BlockHash] = field(default_factory=set)
    store_misses: set[BlockHash] = field(default_factory=set)

    def see(self, hashes: Sequence[BlockHash], first: int, reused: Iterable[BlockHash] = ()) -> None:
        for i, h in enumerate(hashes):
            self.positions.setdefault(h, first + i)
        self.reused.update(h for h in reused if h not in self.inserted)

    def head_to_tail(self) -> list[BlockHash]:
        return sorted(self.positions, key=self.positions.__getitem__)


class ArcLists:
    """T1, T2, B1, B2 and T1's target size over a tier of ``capacity`` blocks."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.target = 0.0
        self.t1: OrderedDict[BlockHash, None] = OrderedDict()
        self.t2: OrderedDict[BlockHash, None] = OrderedDict()
        self.b1: OrderedDict[BlockHash, None] = OrderedDict()
        self.b2: OrderedDict[BlockHash, None] = OrderedDict()

    def insert(self, h: BlockHash) -> None:
        """A newly stored block enters T1 (most recent) and leaves the ghosts."""
        self.t1[h] = None
        self.b1.pop(h, None)
        self.b2.pop(h, None)

    def _ghost_hit(self, h: BlockHash) -> None:
        if h in self.b1:
            self.target = min(self.target + max(1, len(self.b2) / len(self.b1)), self.capacity)
            self.b1.move_to_end(h)
        elif h in self.b2:
            self.target = max(self.target - max(1, len(self.b1) / len(self.b2)), 0)
            self.b2.move_to_end(h)

    def store_misses(self, hashes: Sequence[BlockHash]) -> None:
        """Blocks offered but not held: each found in a ghost list adapts the target (tail first)."""
        for h in reversed(hashes):
            self._ghost_hit(h)

    def choose(self, n: int, evictable: Callable[[BlockHash], bool]) -> list[tuple[BlockHash, bool]] | None:
        """``n`` blocks to evict as (hash, from T1), nothing changed yet; None when fewer are evictable.
        T1's oldest while T1 (less what is already chosen from it) holds at least the target, else T2's,
        else T1's anyway."""
        if n == 0:
            return []
        t1, t2 = iter(self.t1), iter(self.t2)

        def first(keys: Iterator[BlockHash]) -> BlockHash | None:
            return next((h for h in keys if evictable(h)), None)

        out: list[tuple[BlockHash, bool]] = []
        t1_size = len(self.t1)
        for _ in range(n):
            h = first(t1) if t1_size >= int(self.target) else None
            from_t1 = h is not None
            if h is None:
                h = first(t2)
            if h is None:
                h, from_t1 = first(t1), True
                if h is None:
                    return None
            t1_size -= from_t1
            out.append((h, from_t1))
        return out

    def evict(self, h: BlockHash) -> None:
        """``h`` leaves T1 or T2 for its ghost list; the ghosts keep their newest ``capacity`` hashes."""
        if h in self.t1:
            del self.t1[h]
            self.b1[h] = None
        else:
            del self.t2[h]
            self.b2[h] = None
        for ghost in (self.b1, self.b2):
            while len(ghost) > self.capacity:
                ghost.popitem(last=False)

    def finish(self, head_to_tail: Sequence[BlockHash], inserted_only: set[BlockHash],
               reused: set[BlockHash]) -> None:
        """A request finished: tail first, its reused blocks to T2's recent end (from T1: promoted), its
        stored-only blocks to their own list's recent end."""
        for h in reversed(head_to_tail):
            if h in inserted_only:
                if h in self.t1:
                    self.t1.move_to_end(h)
                elif h in self.t2:
                    self.t2.move_to_end(h)
            elif h in reused:
                if h in self.t1:
                    del self.t1[h]
                    self.t2[h] = None
                elif h in self.t2:
                    self.t2.move_to_end(h)

    def order(self) -> list[BlockHash]:
        """Held hashes, T1 (oldest first) then T2 (oldest first)."""
        return [*self.t1, *self.t2]

    def clear(self) -> None:
        for d in (self.t1, self.t2, self.b1, self.b2):
            d.clear()
        self.target = 0.0

    def check(self, held: set[BlockHash]) -> None:
        assert set(self.t1).isdisjoint(self.t2) and set(self.t1) | set(self.t2) == held, "T1 + T2 != held"
        assert set(self.b1).isdisjoint(self.b2) and not (set(self.b1) | set(self.b2)) & held
        assert len(self.b1) <= self.capacity and len(self.b2) <= self.capacity
        assert 0 <= self.target <= self.capacity


__all__ = ["EVICTION_POLICIES", "ArcLists", "RequestAccess"]
