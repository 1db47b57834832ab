"""SGLang's radix tree as a prefix-cache engine (token slots, not the mirror's vLLM blocks): a ``RadixCache``
with a fixed number of token slots, for comparing SGLang's design with vLLM's.

A request matches its longest cached prefix, locks it, and the rest of its prompt is inserted as a new
leaf (locked while it runs); decoded tokens occupy private slots and join the tree when the request
finishes (SGLang's ``cache_finished_req``). Invariant: a prompt or a decode step is admitted only when
the slots it needs are free after evicting unlocked leaves (least recently used first); else it is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvviz.mirror.radix import RadixCache, RadixNode, RadixNodeView


@dataclass(frozen=True)
class EvictedRun:
    """What one engine evicted: a radix node (``block_id`` None) or a pool block, with the token span
    ``[start, end)`` it held in the request that first produced it (``request_id``, when known)."""

    engine: str
    node_or_block: int
    start: int
    end: int
    request_id: str | None

    @property
    def num_tokens(self) -> int:
        return self.end - self.start

    def to_dict(self) -> dict[str, Any]:
        key = "node_id" if self.engine == "radix" else "block_id"
        return {"engine": self.engine, key: self.node_or_block, "tokens": f"{self.start + 1}-{self.end}",
                "num_tokens": self.num_tokens, "request_id": self.request_id}


@dataclass(frozen=True)
class RadixState:
    """The radix tree after one step: its nodes, the slots in use, and the evictable leaves in LRU
    order (``lru_leaves[0]`` is evicted next)."""

    nodes: tuple[RadixNodeView, ...]
    capacity: int
    tree_tokens: int
    private_tokens: int
    evictable_tokens: int
    protected_tokens: int
    lru_leaves: tuple[int, ...]

    @property
    def free_tokens(self) -> int:
        return self.capacity - self.tree_tokens - self.private_tokens

    def to_dict(self) -> dict[str, Any]:
        return {
            "capacity_tokens": self.capacity, "tree_tokens": self.tree_tokens,
            "private_tokens": self.private_tokens, "free_tokens": self.free_tokens,
            "evictable_tokens": self.evictable_tokens, "protected_tokens": self.protected_tokens,
            "lru_leaves": list(self.lru_leaves),
            "nodes": [{"id": n.id, "parent_id": n.parent_id, "start": n.start, "num_tokens": n.num_tokens,
                       "lock_ref": n.lock_ref, "last_access": n.last_access, "leaf": n.is_leaf,
                       "evictable": n.evictable, "salt": n.extra_key} for n in self.nodes],
        }


@dataclass
class _Running:
    tokens: list[int]
    salt: str | None
    leaf: RadixNode
    private: int


class RadixEngine:
    """A ``RadixCache`` with a fixed number of token slots, driven like SGLang's scheduler."""

    def __init__(self, capacity_tokens: int, page_size: int = 1) -> None:
        self.capacity = capacity_tokens
        self.tree = RadixCache(page_size)
        self.running: dict[str, _Running] = {}
        self.owner: dict[int, str] = {}  # node id -> the request whose insert created it

    def free_slots(self) -> int:
        return self.capacity - self.tree.total_size() - sum(r.private for r in self.running.values())

    def _make_room(self, needed: int) -> list[EvictedRun]:
        shortfall = needed - self.free_slots()
        if shortfall <= 0:
            return []
        before = {v.id: v for v in self.tree.snapshot()}
        result = self.tree.evict(shortfall)
        return [EvictedRun("radix", nid, before[nid].start, before[nid].start + before[nid].num_tokens,
                           self.owner.get(nid)) for nid in result.node_ids]

    def _note_owner(self, request_id: str) -> None:
        for view in self.tree.snapshot():
            self.owner.setdefault(view.id, request_id)

    def add(self, request_id: str, tokens: list[int], salt: str | None) -> tuple[int | None, list[EvictedRun], str | None]:
        """Admit a prompt: (reused tokens or None when refused, evictions, error)."""
        n = len(tokens)
        match = self.tree.match_prefix(tokens, salt)
        self.tree.inc_lock_ref(match.last_node)
        needed = n - match.length
        evicted = self._make_room(needed)
        if self.free_slots() < needed:
            self.tree.dec_lock_ref(match.last_node)
            return None, evicted, f"needs {needed} token slot(s) but only {self.free_slots()} are free"
        self.tree.insert(tokens, salt)
        self._note_owner(request_id)
        held = self.tree.match_prefix(tokens, salt)
        self.tree.inc_lock_ref(held.last_node)
        self.tree.dec_lock_ref(match.last_node)
        self.running[request_id] = _Running(list(tokens), salt, held.last_node, n - held.length)
        return min(match.length, n - 1), evicted, None

    def append(self, request_id: str, tokens: list[int]) -> tuple[bool, list[EvictedRun], str | None]:
        req = self.running[request_id]
        evicted = self._make_room(len(tokens))
        if self.free_slots() < len(tokens):
            return False, evicted, f"needs {len(tokens)} token slot(s) but only {self.free_slots()} are free"
        req.tokens.extend(tokens)
        req.private += len(tokens)
        return True, evicted, None

    def free(self, request_id: str) -> None:
        """The request finished: its whole sequence joins the tree (as SGLang's cache_finished_req),
        then its lock is released, so its nodes become evictable."""
        req = self.running.pop(request_id)
        self.tree.insert(req.tokens, req.salt)
        self._note_owner(request_id)
        self.tree.dec_lock_ref(req.leaf)

    def state(self) -> RadixState:
        nodes = tuple(self.tree.snapshot())
        leaves = sorted((n for n in nodes if n.evictable), key=lambda n: (n.last_access, n.id))
        return RadixState(nodes, self.capacity, self.tree.total_size(),
                          sum(r.private for r in self.running.values()),
                          self.tree.evictable_size(), self.tree.protected_size(), tuple(n.id for n in leaves))
