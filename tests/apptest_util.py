"""Helpers for AppTests of pages that change on their own (a live subscriber, a fleet): rerun the page until
what the test waits for is on it, never for a fixed time."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: How long a page may take to show what a test waits for (events arrive over loopback sockets; a loaded
#: 2-core machine delays them). A condition that holds ends the wait at once.
WAIT_S = 40.0
POLL_S = 0.2


def until(app: Any, cond: Callable[[Any], Any], timeout_s: float = WAIT_S,
          describe: Callable[[Any], object] | None = None) -> None:
    """Rerun ``app`` (an AppTest) until ``cond(app)`` is true; after ``timeout_s`` fail with
    ``describe(app)`` (what the page showed), so the failure says what was missing."""
    deadline = time.monotonic() + timeout_s
    while True:
        app.run()
        if cond(app):
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"condition not met within {timeout_s:.0f} s"
                                 + (f"; the page showed {describe(app)}" if describe else ""))
        time.sleep(POLL_S)  # between reruns: the page's sockets get a moment to receive
