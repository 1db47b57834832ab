"""The room page's "Your last prompt" as records, built by one function for the page and the CLI:
per-block rows (who computed each block, when) and the salt view (the prompt's hash chain without and
with a salt, and which of those blocks the engine's pool caches now).

Invariant: the chains of one prompt are hashed once per (prompt, salt) (``Room.salt_chains`` keeps them);
a rerun of the page only asks the pool which hashes it caches, in one look between two engine steps.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.experiments.room.records import OTHER, Admission
from kvviz.experiments.room.room import Room
from kvviz.experiments.room.session import salt_for_view
from kvviz.mirror.hashing import BlockHashRecord


def status_key(status: str, computed_by: str | None) -> str:
    """``hit_other``/``hit_you``/``computed``/``partial`` for a block outcome."""
    if status == "hit":
        return "hit_other" if computed_by == OTHER else "hit_you"
    return status


@dataclass(frozen=True)
class BlockRow:
    """One logical block of the last prompt: its tokens ``first..last``, its status key, who computed it
    (``you``/``other``/None) and how long ago (seconds), and its hash (None for the partial tail)."""

    index: int
    first: int
    last: int
    status: str
    who: str | None
    age_s: float | None
    block_hash: bytes | None


@dataclass(frozen=True)
class SaltRow:
    """One full block in both chains: its hash without a salt and with one, and whether each is cached."""

    index: int
    plain_hash: bytes | None
    plain_cached: bool
    salted_hash: bytes | None
    salted_cached: bool
    salt_key: bool  # the salt enters this block's hash (block 0 only: later blocks inherit it via the parent)


@dataclass(frozen=True)
class LastPromptView:
    """A session's last admitted prompt as the page and the CLI show it."""

    admission: Admission
    blocks: tuple[BlockRow, ...]
    salt: str
    illustrative: bool  # the session's salt is off: the salted chain uses a salt never sent to the engine
    plain: tuple[BlockHashRecord, ...]
    salted: tuple[BlockHashRecord, ...]
    plain_cached: tuple[bool, ...]  # per full block
    salted_cached: tuple[bool, ...]
    block_size: int

    @property
    def from_others_tokens(self) -> int:
        return self.admission.blocks_from_others * self.block_size

    @property
    def from_you_tokens(self) -> int:
        return self.admission.hit_tokens - self.from_others_tokens

    @property
    def salt_rows(self) -> list[SaltRow]:
        plain = [r for r in self.plain if r.full]
        salted = [r for r in self.salted if r.full]
        return [SaltRow(p.index, p.hash, pc, s.hash, sc, bool(s.extra_keys))
                for p, s, pc, sc in zip(plain, salted, self.plain_cached, self.salted_cached, strict=True)]


def last_prompt_view(room: Room, session_id: str) -> LastPromptView | None:
    """The session's last prompt (None before its first one, and after a reset) with its block rows and
    its salt view; ``session_id`` must be in the room (CodedError ``unknown_session`` otherwise)."""
    view = room.session_view(session_id)
    adm = view.last
    if adm is None:
        return None
    now = room.now()
    rows = tuple(BlockRow(b.index, b.start, b.end - 1, status_key(b.status, b.computed_by),
                          b.computed_by if b.status != "partial" else None,
                          None if b.computed_at is None else max(0.0, now - b.computed_at), b.block_hash)
                 for b in adm.blocks)
    salt, illustrative = salt_for_view(session_id, view.cache_salt)
    plain, salted = room.salt_chains(adm, salt)
    full = [r.hash for r in plain if r.full] + [r.hash for r in salted if r.full]
    cached = room.cached_flags(full)
    n = len(full) // 2
    return LastPromptView(adm, rows, salt, illustrative, plain, salted, tuple(cached[:n]), tuple(cached[n:]),
                          room.block_size)
