"""The room's bounds (``RoomLimits``), validated once. The pool is the engine's (``KVVIZ_KV_CACHE_MIB``)."""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class RoomLimits:
    """The room's bounds on prompts, sessions, rates and history; the pool's size is the engine's."""

    max_prompt_chars: int = 20_000
    max_prompt_tokens: int = 512
    max_sessions: int = 256
    burst: int = 8
    refill_per_s: float = 0.5
    room_burst: int = 200
    room_refill_per_s: float = 25.0
    reset_cooldown_s: float = 3.0
    reset_wait_s: float = 5.0  # how long a reset waits for the engine to have no request holding blocks
    feed_size: int = 60
    timing_history: int = 500
    active_window_s: float = 600.0
    max_team_salt_chars: int = 64

    def validate(self) -> RoomLimits:
        """Self, or ValueError naming the first absurd bound."""
        ints = {"max_prompt_chars": (1, 10_000_000),
                "max_prompt_tokens": (1, 32768), "max_sessions": (1, 100_000), "burst": (1, 1_000_000),
                "room_burst": (1, 10_000_000), "feed_size": (1, 10_000),
                "timing_history": (1, 1_000_000), "max_team_salt_chars": (1, 1024)}
        for name, (lo, hi) in ints.items():
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
                raise ValueError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
        for name in ("refill_per_s", "room_refill_per_s", "reset_cooldown_s", "reset_wait_s", "active_window_s"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0 <= float(value) <= 1e9:
                raise ValueError(f"{name} must be a number in 0..1e9, got {value!r}")
        return self


def with_limits(limits: RoomLimits, **changes: object) -> RoomLimits:
    """``limits`` with some fields changed (validated)."""
    return replace(limits, **changes).validate()  # type: ignore[arg-type]
