"""Per-session state inside the room: the session's cache salt, rate bucket and totals, and the
origin of each cached block (who first computed it, when, how often others hit it).

Invariant: a session's cache salt follows its mode (``off``: none, ``private``: a random salt only it
knows, ``team``: ``"team:" + name``, shared by everyone who types the same name).
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field

from kvviz.experiments.room.rate_limit import TokenBucket
from kvviz.experiments.room.records import Admission

SALT_MODES = ("off", "private", "team")


@dataclass
class BlockOrigin:
    """Who first computed a cached block, when, and how often other sessions have hit it. ``session_id``
    None: not a room session (an API client, another page) or one whose prompt has not reported yet."""

    session_id: str | None
    created_at: float
    hits_by_others: int = 0


@dataclass
class RoomSession:
    """One browser session in the room: its salt mode, rate bucket and prompt totals."""

    session_id: str
    joined_at: float
    last_seen: float
    bucket: TokenBucket
    private_salt: str = field(default_factory=lambda: secrets.token_hex(16))
    salt_mode: str = "off"
    team_salt: str = ""
    prompts: int = 0
    prompt_tokens: int = 0
    hit_tokens: int = 0
    blocks_from_others: int = 0
    last: Admission | None = None

    @property
    def cache_salt(self) -> str | None:
        if self.salt_mode == "private":
            return self.private_salt
        if self.salt_mode == "team" and self.team_salt:
            return "team:" + self.team_salt
        return None


DEMO_SALT_PREFIX = "private:"


def salt_for_view(session_id: str, cache_salt: str | None) -> tuple[str, bool]:
    """The salt the "why the salt isolates" view hashes a prompt with: the session's own ``cache_salt``, or,
    when its salt is off, an illustrative private salt derived from ``session_id`` (never sent to the room).
    Returns ``(salt, illustrative)``."""
    if cache_salt is not None:
        return cache_salt, False
    return DEMO_SALT_PREFIX + session_id[:4], True
