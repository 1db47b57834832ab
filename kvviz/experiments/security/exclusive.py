"""One heavy experiment at a time per server process, and the latest result of each for every session."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

# ----------------------------------------------------------------------------- one experiment at a time

_EXPERIMENT_LOCK = threading.Lock()
_LATEST: dict[str, tuple[float, Any]] = {}


def run_exclusive(name: str, fn: Callable[[], Any]) -> Any | None:
    """Run one experiment ``fn`` unless another session's experiment is running (then None, at once):
    timings taken while another experiment holds the model would measure the queue, not the cache.
    The result is kept as the latest of ``name`` for every session to see."""
    if not _EXPERIMENT_LOCK.acquire(blocking=False):
        return None
    try:
        result = fn()
        _LATEST[name] = (time.time(), result)
        return result
    finally:
        _EXPERIMENT_LOCK.release()


def latest_result(name: str) -> tuple[float, Any] | None:
    """(wall-clock time it finished, result) of the latest ``run_exclusive(name, ...)``, or None."""
    return _LATEST.get(name)
