"""SGLang's prefix cache, not vLLM's: the mirror's block pool keys fixed-size blocks by hash chains, this keys
token runs by tree edges. A radix tree of token sequences with SGLang's ``RadixCache`` semantics
(``python/sglang/srt/mem_cache/radix_cache.py``), without the KV tensors.

Each edge holds a run of tokens; ``match_prefix`` walks from the root and splits a node when the
match ends inside it; ``insert`` adds the unmatched suffix as a new leaf. ``inc_lock_ref`` pins a node
and all its ancestors (a running request uses them); ``evict`` removes unlocked leaves, least recently
used first, until enough tokens are freed. With ``page_size > 1`` keys are matched whole pages at a
time and truncated to a page multiple, as SGLang does. An optional ``extra_key`` (LoRA id, cache salt)
keeps separate namespaces that never share nodes. Access times are a logical clock (one tick per
operation), so the LRU order is reproducible.
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

PREVIEW_TOKENS = 8


@dataclass(eq=False)
class RadixNode:
    """One tree node: the token run on the edge from its parent, its lock count and last access."""

    id: int
    key: tuple[int, ...] = ()
    parent: RadixNode | None = None
    children: dict[Hashable, RadixNode] = field(default_factory=dict)
    lock_ref: int = 0
    last_access: int = 0
    extra_key: str | None = None

    def __repr__(self) -> str:
        return f"RadixNode(id={self.id}, tokens={len(self.key)}, lock_ref={self.lock_ref})"


@dataclass(frozen=True)
class MatchResult:
    """``length`` tokens matched; ``node_ids`` the path (root excluded) ending at ``last_node``."""

    length: int
    node_ids: tuple[int, ...]
    last_node: RadixNode


@dataclass(frozen=True)
class EvictResult:
    num_tokens_evicted: int
    node_ids: tuple[int, ...]


@dataclass(frozen=True)
class RadixNodeView:
    """One node for drawing. ``start`` is the token offset where its run begins."""

    id: int
    parent_id: int | None
    num_tokens: int
    tokens_preview: tuple[int, ...]
    start: int
    lock_ref: int
    last_access: int
    is_leaf: bool
    evictable: bool
    extra_key: str | None


class RadixCache:
    """Token-sequence radix tree with lock counts and LRU leaf eviction (SGLang semantics)."""

    def __init__(self, page_size: int = 1) -> None:
        if isinstance(page_size, bool) or not isinstance(page_size, int) or page_size < 1:
            raise ValueError(f"page_size must be a positive integer, got {page_size!r}")
        self.page_size = page_size
        self.reset()

    def reset(self) -> None:
        self._next_id = 0
        self.clock = 0
        self.root_node = self._new_node()
        self.root_node.lock_ref = 1  # the root is never evicted
        self.evictable_size_ = 0
        self.protected_size_ = 0
        self._evictable_leaves: set[RadixNode] = set()

    def _new_node(self, **kwargs) -> RadixNode:
        node = RadixNode(id=self._next_id, **kwargs)
        self._next_id += 1
        return node

    # -- keys ---------------------------------------------------------------------------------
    def _align(self, tokens: Sequence[int]) -> tuple[int, ...]:
        key = tuple(tokens)
        if self.page_size > 1:
            key = key[: len(key) // self.page_size * self.page_size]
        return key

    def _child_key(self, key: tuple[int, ...], extra_key: str | None) -> Hashable:
        plain: Hashable = key[0] if self.page_size == 1 else key[: self.page_size]
        return plain if extra_key is None else (extra_key, plain)

    def _key_match(self, key0: tuple[int, ...], key1: tuple[int, ...]) -> int:
        n = min(len(key0), len(key1))
        i = 0
        if self.page_size == 1:
            while i < n and key0[i] == key1[i]:
                i += 1
            return i
        ps = self.page_size
        while i < n and key0[i : i + ps] == key1[i : i + ps]:
            i += ps
        return i

    # -- public API ---------------------------------------------------------------------------
    def match_prefix(self, tokens: Sequence[int], extra_key: str | None = None) -> MatchResult:
        """Longest cached prefix of ``tokens`` (page-aligned when ``page_size > 1``). Refreshes the
        access time of every node on the path and splits the last one if the match ends inside."""
        key = self._align(tokens)
        self.clock += 1
        node = self.root_node
        node.last_access = self.clock
        path: list[int] = []
        length = 0
        while key:
            child = node.children.get(self._child_key(key, extra_key))
            if child is None:
                break
            child.last_access = self.clock
            matched = self._key_match(child.key, key)
            if matched < len(child.key):
                node = self._split_node(child, matched)
                path.append(node.id)
                length += matched
                break
            path.append(child.id)
            length += matched
            node = child
            key = key[matched:]
        return MatchResult(length, tuple(path), node)

    def insert(self, tokens: Sequence[int], extra_key: str | None = None) -> int:
        """Add ``tokens`` (page-aligned); return how many leading tokens were already in the tree.
        The walk is ``match_prefix``'s (same access times, same split); the rest hangs off its end."""
        match = self.match_prefix(tokens, extra_key)
        key = self._align(tokens)[match.length :]
        node = match.last_node
        if key:
            leaf = self._new_node(key=key, parent=node, last_access=self.clock, extra_key=extra_key)
            node.children[self._child_key(key, extra_key)] = leaf
            self.evictable_size_ += len(key)
            self._update_leaf_status(node)
            self._update_leaf_status(leaf)
        return match.length

    def inc_lock_ref(self, node: RadixNode) -> int:
        """Pin ``node`` and its ancestors against eviction; returns the change in evictable tokens."""
        delta = 0
        while node is not self.root_node and node is not None:
            if node.lock_ref == 0:
                self.evictable_size_ -= len(node.key)
                self.protected_size_ += len(node.key)
                delta -= len(node.key)
            node.lock_ref += 1
            self._update_leaf_status(node)
            node = node.parent  # type: ignore[assignment]
        return delta

    def dec_lock_ref(self, node: RadixNode) -> int:
        """Undo one ``inc_lock_ref``; returns the change in evictable tokens."""
        delta = 0
        while node is not self.root_node and node is not None:
            if node.lock_ref <= 0:
                raise RuntimeError(f"node {node.id} unlocked more often than locked")
            if node.lock_ref == 1:
                self.evictable_size_ += len(node.key)
                self.protected_size_ -= len(node.key)
                delta += len(node.key)
            node.lock_ref -= 1
            self._update_leaf_status(node)
            node = node.parent  # type: ignore[assignment]
        return delta

    def lock(self, tokens: Sequence[int], extra_key: str | None = None) -> MatchResult:
        """Match ``tokens`` and pin the matched path (what a request does while it runs)."""
        result = self.match_prefix(tokens, extra_key)
        self.inc_lock_ref(result.last_node)
        return result

    def unlock(self, result: MatchResult) -> None:
        self.dec_lock_ref(result.last_node)

    def evict(self, num_tokens: int) -> EvictResult:
        """Remove unlocked leaves, least recently used first (ties: lower id), until at least
        ``num_tokens`` tokens are freed or nothing evictable remains. A parent left childless and
        unlocked becomes a candidate in turn."""
        heap = [(n.last_access, n.id, n) for n in self._evictable_leaves]
        heapq.heapify(heap)
        evicted = 0
        ids: list[int] = []
        while evicted < num_tokens and heap:
            _, _, node = heapq.heappop(heap)
            evicted += len(node.key)
            ids.append(node.id)
            parent = node.parent
            self._delete_leaf(node)
            if parent is not None and not parent.children and parent.lock_ref == 0:
                heapq.heappush(heap, (parent.last_access, parent.id, parent))
        return EvictResult(evicted, tuple(ids))

    # -- sizes and views ----------------------------------------------------------------------
    def evictable_size(self) -> int:
        return self.evictable_size_

    def protected_size(self) -> int:
        return self.protected_size_

    def total_size(self) -> int:
        return sum(len(n.key) for n in self._iter_nodes())

    def _iter_nodes(self) -> list[RadixNode]:
        out: list[RadixNode] = []
        stack = [self.root_node]
        while stack:
            node = stack.pop()
            out.append(node)
            stack.extend(sorted(node.children.values(), key=lambda n: -n.id))
        return out

    def snapshot(self) -> list[RadixNodeView]:
        """Every node (root first, depth-first, children by id) for drawing the tree."""
        views: list[RadixNodeView] = []
        stack: list[tuple[RadixNode, int]] = [(self.root_node, 0)]
        while stack:
            node, start = stack.pop()
            views.append(RadixNodeView(
                id=node.id,
                parent_id=node.parent.id if node.parent is not None else None,
                num_tokens=len(node.key),
                tokens_preview=node.key[:PREVIEW_TOKENS],
                start=start,
                lock_ref=node.lock_ref,
                last_access=node.last_access,
                is_leaf=not node.children,
                evictable=node in self._evictable_leaves,
                extra_key=node.extra_key,
            ))
            end = start + len(node.key)
            for child in sorted(node.children.values(), key=lambda n: -n.id):
                stack.append((child, end))
        return views

    # -- internals ----------------------------------------------------------------------------
    def _split_node(self, child: RadixNode, split_len: int) -> RadixNode:
        """Cut ``child``'s run at ``split_len``: a new node takes the first part, ``child`` keeps the
        rest and hangs below it. The new node inherits ``child``'s lock count."""
        parent = child.parent
        assert parent is not None
        new_node = self._new_node(
            key=child.key[:split_len], parent=parent, lock_ref=child.lock_ref,
            last_access=child.last_access, extra_key=child.extra_key,
        )
        parent.children[self._child_key(child.key, child.extra_key)] = new_node
        child.key = child.key[split_len:]
        child.parent = new_node
        new_node.children[self._child_key(child.key, child.extra_key)] = child
        return new_node

    def _delete_leaf(self, node: RadixNode) -> None:
        parent = node.parent
        assert parent is not None
        removed = parent.children.pop(self._child_key(node.key, node.extra_key), None)
        assert removed is node
        self.evictable_size_ -= len(node.key)
        self._evictable_leaves.discard(node)
        node.parent = None
        self._update_leaf_status(parent)

    def _update_leaf_status(self, node: RadixNode) -> None:
        if node.lock_ref > 0 or node.children or node is self.root_node:
            self._evictable_leaves.discard(node)
        else:
            self._evictable_leaves.add(node)
