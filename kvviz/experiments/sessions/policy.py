"""Provider-side cache policy: checkpoint entries keyed by chained block hashes, TTL, minimum length."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from kvviz.analysis.providers import CachePolicy
from kvviz.experiments.sessions.results import SegmentSpan
from kvviz.mirror.hashing import get_hash_fn, hash_block_chain, hash_block_tokens, init_none_hash

# ---------------------------------------------------------------- provider checkpoints


@dataclass
class _Entry:
    length: int
    expires_at: float | None


@dataclass
class CheckpointCache:
    """Provider-side entries: prefix key -> entry; a key is the chained block hash of the prefix."""

    block_size: int
    hash_name: str = "sha256_cbor"
    entries: dict[bytes, _Entry] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.hash_fn = get_hash_fn(self.hash_name)
        self.none_hash = init_none_hash(self.hash_fn, "0")

    def keys(self, tokens: list[int]) -> Callable[[int], bytes]:
        """Key of the prefix ``tokens[:n]``: the chain hash of its full blocks, then its tail."""
        chain = hash_block_chain(tokens, self.block_size, self.hash_fn, self.none_hash)

        def key(n: int) -> bytes:
            full, tail = divmod(n, self.block_size)
            parent = chain[full - 1] if full else self.none_hash
            if not tail:
                return parent
            return hash_block_tokens(self.hash_fn, parent, tokens[full * self.block_size : n], ("checkpoint",))

        return key

    def expire(self, now: float) -> int:
        dead = [k for k, e in self.entries.items() if e.expires_at is not None and e.expires_at <= now]
        for k in dead:
            del self.entries[k]
        return len(dead)



def checkpoint_positions(policy: CachePolicy, marks: tuple[str, ...], spans: tuple[SegmentSpan, ...],
                          n: int, block_size: int) -> list[int]:
    if policy.checkpoints == "automatic":
        return list(range(block_size, n + 1, block_size))
    positions = set()
    if "system" in marks:
        positions.update(s.end for s in spans if s.kind == "system")
    if "last" in marks:
        positions.add(n)
    return sorted(p for p in positions if 0 < p <= n)



def policy_turn(store: CheckpointCache, pol: CachePolicy, marks: tuple[str, ...],
                 spans: tuple[SegmentSpan, ...], prompt: list[int], now: float, ttl: float | None,
                 min_len: int, block_size: int) -> tuple[int, int]:
    """One request against provider-side checkpoint entries: (tokens read, tokens written)."""
    key = store.keys(prompt)
    read = 0
    read_key = None
    for length in sorted({e.length for e in store.entries.values() if e.length <= len(prompt)}, reverse=True):
        k = key(length)
        if k in store.entries:
            read, read_key = length, k
            break
    expires = None if ttl is None else now + ttl
    if read_key is not None and pol.refresh_on_hit:
        store.entries[read_key].expires_at = expires
    written_to = 0
    for pos in checkpoint_positions(pol, marks, spans, len(prompt), block_size):
        if pos < min_len:
            continue
        k = key(pos)
        if k in store.entries:
            if pol.refresh_on_hit and pos <= read:
                store.entries[k].expires_at = expires
            continue
        store.entries[k] = _Entry(pos, expires)
        written_to = max(written_to, pos)
    return read, max(0, written_to - read)
