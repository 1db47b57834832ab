"""A token bucket: the room's per-session and room-wide rate limit."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TokenBucket:
    """A token bucket: ``capacity`` tokens, refilled at ``rate`` per second."""

    capacity: float
    rate: float
    tokens: float
    at: float

    def take(self, now: float) -> float:
        """0.0 when a token was taken, else the seconds until one is available."""
        self.tokens = min(self.capacity, self.tokens + max(0.0, now - self.at) * self.rate)
        self.at = now
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return 0.0
        return (1.0 - self.tokens) / self.rate if self.rate > 0 else float("inf")
