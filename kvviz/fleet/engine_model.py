"""A remote engine's prefix cache rebuilt from its KV-cache events, not the mirror: events carry hashes and
locations only (no tokens, ref counts or free queue), so this keeps what they tell and nothing more (no sockets
here).

Invariants: a block hash is in ``blocks`` iff at least one location (DP rank, medium, group, locality,
ownership: vLLM 0.33.0's fields) holds it now; a removal of a hash or location never stored changes nothing; at most ``max_blocks`` hashes are
tracked and every block refused beyond that is counted in ``overflow``. Parent links come from
``parent_block_hash``, so chains sharing a prefix form trees rooted at blocks whose parent is not held.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kvviz.fleet.wire import (
    MEDIUM_GPU,
    AllBlocksCleared,
    BlockRemoved,
    BlockStored,
    EventBatch,
    ExternalBlockHash,
)

DEFAULT_MAX_BLOCKS = 200_000
HISTORY_SECONDS = 600  # per-second samples kept for the rate charts
MAX_TREE_BLOCKS_WALKED = 50_000
MAX_SESSIONS = 1_000  # distinct session ids counted; stores of further sessions count under OTHER_SESSION
OTHER_SESSION = "\x00other"
RECENT_STORES = 12
# (data-parallel rank, medium, kv-cache group, locality, ownership): where a copy of a block lives.
Location = tuple[int, str, int, str | None, str | None]


@dataclass(slots=True)
class CachedBlock:
    """One block hash held by the engine: its parent (None: first of its chain), its tokens and
    where it is held."""

    parent: ExternalBlockHash | None
    tokens: tuple[int, ...]
    where: dict[Location, int] = field(default_factory=dict)  # location -> physical blocks holding it
    session_id: str | None = None  # the session whose request stored it last (vLLM 0.33.0 session_id)


@dataclass(frozen=True, slots=True)
class StoreNote:
    """One BlockStored as received, for the page's "latest stores" table (first hash, counts and the
    fields vLLM 0.33.0 added: locality, ownership, session, lookahead tokens)."""

    t: float
    rank: int
    first_hash: ExternalBlockHash
    blocks: int
    medium: str
    locality: str | None
    ownership: str | None
    session_id: str | None
    group_idx: int
    kv_cache_spec_kind: str | None
    sliding_window: int | None
    lora_name: str | None
    extra_keys: tuple | None  # the first block's untagged extra keys
    lookahead_tokens: int  # lookahead tokens per block (0: lookahead hashing off)


@dataclass(frozen=True, slots=True)
class Sample:
    """One second of traffic: batches and events received, and blocks held at its end."""

    t: float
    batches: int
    stored: int
    removed: int
    cleared: int
    blocks_held: int
    gpu_blocks: int
    cpu_blocks: int


@dataclass(frozen=True, slots=True)
class PrefixTree:
    """A cached prefix tree: root hash, blocks and tokens held under it, its depth in blocks, its
    number of leaves, and the tokens of its deepest chain (root first)."""

    root: ExternalBlockHash
    blocks: int
    tokens: int
    depth: int
    leaves: int
    chain_tokens: tuple[int, ...]
    where: tuple[str, ...] = ()  # the root's copies as "MEDIUM" or "MEDIUM/LOCALITY", sorted
    session_id: str | None = None  # the session that stored the deepest block


@dataclass(slots=True)
class _Second:
    t: int
    batches: int = 0
    stored: int = 0
    removed: int = 0
    cleared: int = 0


class EngineModel:
    """The engine's prefix cache as its events describe it. Not thread-safe: the subscriber
    serialises access with its own lock."""

    def __init__(self, max_blocks: int = DEFAULT_MAX_BLOCKS, history_seconds: int = HISTORY_SECONDS) -> None:
        self.max_blocks = max_blocks
        self.blocks: dict[ExternalBlockHash, CachedBlock] = {}
        self.children: dict[ExternalBlockHash | None, set[ExternalBlockHash]] = {}
        self.events = {"BlockStored": 0, "BlockRemoved": 0, "AllBlocksCleared": 0}
        self.batches = 0
        self.unknown_kinds = 0
        self.unknown_fields = 0
        self.overflow = 0
        self.block_size: int | None = None
        self.dp_ranks: set[int] = set()
        self.media: dict[str, int] = {}  # medium -> (hash, location) pairs held
        self.hash_kind: str | None = None  # "bytes" or "int", as the engine sends them
        self.history: deque[Sample] = deque(maxlen=history_seconds)
        self._second: _Second | None = None
        self.localities: dict[str, int] = {}  # locality ("LOCAL", "REMOTE", "" = unspecified) -> copies held
        self.groups: dict[int, tuple[str | None, int | None]] = {}  # group_idx -> (spec kind, sliding window)
        self.session_stores: dict[str, int] = {}  # session id -> blocks it stored (bounded, see MAX_SESSIONS)
        self.recent: deque[StoreNote] = deque(maxlen=RECENT_STORES)
        self._now = 0.0

    # -------------------------------------------------------------- applying events
    def apply(self, batch: EventBatch, now: float) -> None:
        """Apply one batch received at wall-clock time ``now`` (seconds)."""
        rank = batch.batch.data_parallel_rank or 0
        self._now = now
        self.dp_ranks.add(rank)
        self.batches += 1
        self.unknown_kinds += batch.unknown_kinds
        self.unknown_fields += batch.unknown_fields
        sec = self._bucket(now)
        sec.batches += 1
        for event in batch.batch.events:
            if isinstance(event, BlockStored):
                self._stored(event, rank)
                sec.stored += 1
                self.events["BlockStored"] += 1
            elif isinstance(event, BlockRemoved):
                self._removed(event, rank)
                sec.removed += 1
                self.events["BlockRemoved"] += 1
            elif isinstance(event, AllBlocksCleared):
                self._cleared(rank)
                sec.cleared += 1
                self.events["AllBlocksCleared"] += 1

    def _note(self, event: BlockStored, rank: int, where: Location) -> None:
        group = where[2]
        if event.kv_cache_spec_kind is not None or group not in self.groups:
            self.groups[group] = (event.kv_cache_spec_kind, event.kv_cache_spec_sliding_window)
        if event.session_id is not None:
            key = event.session_id if (event.session_id in self.session_stores
                                       or len(self.session_stores) < MAX_SESSIONS) else OTHER_SESSION
            self.session_stores[key] = self.session_stores.get(key, 0) + len(event.block_hashes)
        if event.block_hashes:
            extra = event.extra_keys[0] if event.extra_keys else None
            ahead = event.lookahead_token_ids
            self.recent.append(StoreNote(self._now, rank, event.block_hashes[0], len(event.block_hashes), where[1],
                                         event.locality, event.ownership, event.session_id, group,
                                         event.kv_cache_spec_kind, event.kv_cache_spec_sliding_window,
                                         event.lora_name, extra, len(ahead[0]) if ahead else 0))

    def _stored(self, event: BlockStored, rank: int) -> None:
        self.block_size = event.block_size
        where = (rank, event.medium or MEDIUM_GPU, event.group_idx or 0, event.locality, event.ownership)
        self._note(event, rank, where)
        parent = event.parent_block_hash
        bs = event.block_size
        for i, h in enumerate(event.block_hashes):
            if self.hash_kind is None:
                self.hash_kind = "int" if isinstance(h, int) else "bytes"
            tokens = event.token_ids[i * bs:(i + 1) * bs]
            block = self.blocks.get(h)
            if block is None:
                if len(self.blocks) >= self.max_blocks:
                    self.overflow += 1
                    parent = h
                    continue
                block = self.blocks[h] = CachedBlock(parent, tuple(tokens))
                self.children.setdefault(parent, set()).add(h)
            if where not in block.where:
                self.media[where[1]] = self.media.get(where[1], 0) + 1
                loc = where[3] or ""
                self.localities[loc] = self.localities.get(loc, 0) + 1
            block.where[where] = block.where.get(where, 0) + 1  # vLLM may hold one hash in two blocks
            if event.session_id is not None:
                block.session_id = event.session_id
            parent = h

    def _drop(self, h: ExternalBlockHash, where: Location, every: bool = False) -> None:
        block = self.blocks.get(h)
        if block is None or where not in block.where:
            return
        block.where[where] -= 1
        if every or block.where[where] <= 0:
            del block.where[where]
            self.media[where[1]] -= 1
            self.localities[where[3] or ""] -= 1
        if not block.where:
            del self.blocks[h]
            siblings = self.children.get(block.parent)
            if siblings is not None:
                siblings.discard(h)
                if not siblings:
                    del self.children[block.parent]

    def _removed(self, event: BlockRemoved, rank: int) -> None:
        where = (rank, event.medium or MEDIUM_GPU, event.group_idx or 0, event.locality, event.ownership)
        for h in event.block_hashes:
            self._drop(h, where)

    def clear_rank(self, rank: int) -> None:
        """Forget every block ``rank`` holds (its cache was cleared or its engine restarted)."""
        self._cleared(rank)

    def _cleared(self, rank: int) -> None:
        for h, block in list(self.blocks.items()):
            for where in [w for w in block.where if w[0] == rank]:
                self._drop(h, where, every=True)

    def _bucket(self, now: float) -> _Second:
        t = int(now)
        sec = self._second
        if sec is None or t != sec.t:
            if sec is not None:
                self._close(sec)
            sec = self._second = _Second(t)
        return sec

    def _close(self, sec: _Second) -> None:
        self.history.append(Sample(float(sec.t), sec.batches, sec.stored, sec.removed, sec.cleared,
                                   len(self.blocks), self.media.get(MEDIUM_GPU, 0), self.media.get("CPU", 0)))

    def tick(self, now: float) -> None:
        """Close the current second if ``now`` is past it, so an idle engine still draws a flat line."""
        if self._second is not None and int(now) != self._second.t:
            self._close(self._second)
            self._second = _Second(int(now))

    # -------------------------------------------------------------- views
    @property
    def cached_blocks(self) -> int:
        """Distinct block hashes held now, anywhere."""
        return len(self.blocks)

    @property
    def stored_tokens(self) -> int:
        """Tokens in the distinct blocks held now."""
        return sum(len(b.tokens) for b in self.blocks.values())

    def blocks_by_medium(self) -> dict[str, int]:
        """Blocks held per medium (a block on two ranks counts twice)."""
        return {m: n for m, n in sorted(self.media.items()) if n}

    def blocks_by_locality(self) -> dict[str, int]:
        """Copies held per locality ("" = the publisher did not say, as vLLM's GPU pool)."""
        return {k: n for k, n in sorted(self.localities.items()) if n}

    def top_sessions(self, n: int = 5) -> list[tuple[str, int]]:
        """The ``n`` sessions that stored the most blocks, most first."""
        return sorted(self.session_stores.items(), key=lambda kv: (-kv[1], kv[0]))[:n]

    def cached_run(self, hashes: Sequence[ExternalBlockHash]) -> tuple[list[bool], int]:
        """For a prompt's chained hashes: which are held now, and the leading run the engine can reuse."""
        status = [h in self.blocks for h in hashes]
        run = 0
        while run < len(status) and status[run]:
            run += 1
        return status, run

    def roots(self) -> list[ExternalBlockHash]:
        """Blocks whose parent is not held: the roots of the cached prefix trees."""
        return [h for h, b in self.blocks.items() if b.parent is None or b.parent not in self.blocks]

    def tree(self, root: ExternalBlockHash) -> PrefixTree:
        """Size, depth and deepest chain of the tree under ``root`` (walk bounded for huge caches)."""
        blocks = tokens = leaves = 0
        deepest, deepest_depth = root, 1
        stack: list[tuple[ExternalBlockHash, int]] = [(root, 1)]
        while stack and blocks < MAX_TREE_BLOCKS_WALKED:
            h, depth = stack.pop()
            blocks += 1
            tokens += len(self.blocks[h].tokens)
            kids = self.children.get(h, ())
            if not kids:
                leaves += 1
                if depth > deepest_depth:
                    deepest, deepest_depth = h, depth
            stack.extend((k, depth + 1) for k in kids)
        chain: list[ExternalBlockHash] = []
        node: ExternalBlockHash | None = deepest
        while node is not None and len(chain) < deepest_depth:  # parent links back up to the root
            chain.append(node)
            node = self.blocks[node].parent if node != root else None
        chain_tokens = tuple(t for h in reversed(chain) for t in self.blocks[h].tokens)
        where = tuple(sorted({w[1] if not w[3] else f"{w[1]}/{w[3]}" for w in self.blocks[root].where}))
        return PrefixTree(root, blocks, tokens, deepest_depth, leaves, chain_tokens, where,
                          self.blocks[deepest].session_id)

    def largest_trees(self, n: int = 5) -> list[PrefixTree]:
        """The ``n`` prefix trees holding the most blocks, largest first."""
        trees = [self.tree(r) for r in self.roots()]
        trees.sort(key=lambda t: (-t.blocks, -t.depth))
        return trees[:n]

    def samples(self) -> list[Sample]:
        return list(self.history)


def hash_label(h: ExternalBlockHash | None, n: int = 8) -> str:
    """Short printable form of a block hash (hex prefix for bytes, hex of the int otherwise)."""
    if h is None:
        return ""
    return h.hex()[:n] if isinstance(h, bytes) else f"{h:016x}"[:n]


def match_hash_form(hashes: Iterable[bytes], hash_kind: str | None) -> list[ExternalBlockHash]:
    """Prompt hashes (bytes) in the form the engine publishes: ints when it sends ints."""
    from kvviz.fleet.wire import to_int_hash

    return [to_int_hash(h) for h in hashes] if hash_kind == "int" else list(hashes)


@dataclass(frozen=True, slots=True)
class PromptStatus:
    """A prompt's full blocks hashed as vLLM hashes them, whether the engine holds each one now, and
    the leading run it can reuse (a hit stops at the first block not held). ``complete`` False: the events
    seen do not cover the engine's whole cache (joined late, no replay), so a block not seen is unknown,
    not uncached, and the engine's run may be longer than ``cached_run``."""

    block_size: int
    num_tokens: int
    hashes: tuple[ExternalBlockHash, ...]
    cached: tuple[bool, ...]
    cached_run: int
    complete: bool = True

    @property
    def blocks(self) -> int:
        return len(self.hashes)

    @property
    def unknown(self) -> int:
        """Blocks not seen stored that may have been stored before the events kvviz saw (0 when complete)."""
        return 0 if self.complete else self.blocks - sum(self.cached)


def prompt_status(model: EngineModel, tokens: Sequence[int], block_size: int, hash_name: str,
                  seed: str | None, cache_salt: str | None = None, lora_name: str | None = None,
                  lora_path: str | None = None) -> PromptStatus:
    """Hash ``tokens`` with ``kvviz.mirror.hashing`` (same bytes as vLLM, salt and LoRA included) and look
    each block up in ``model``."""
    from kvviz.mirror.hashing import get_hash_fn, hash_block_chain, init_none_hash

    fn = get_hash_fn(hash_name)
    digests = hash_block_chain(tokens, block_size, fn, init_none_hash(fn, seed), cache_salt or None,
                               lora_name or None, lora_path=lora_path or None)
    hashes = match_hash_form(digests, model.hash_kind)
    status, run = model.cached_run(hashes)
    return PromptStatus(block_size, len(tokens), tuple(hashes), tuple(status), run)
