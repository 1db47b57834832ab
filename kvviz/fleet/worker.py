"""The background-thread lifecycle the demo publisher and the live subscriber share: ``Worker`` (one
daemon thread running ``_loop``) and ``WorkerRegistry`` (the process-wide workers by key, replaced
when they die).

``Worker`` invariants: one thread per instance, started at most once (``start`` again is a no-op, and a
worker stopped before it started never starts); ``stop`` is idempotent and safe before ``start``, from
any thread, and from the worker's own thread; an exception that ends ``_loop`` is kept in ``error`` (one
line) and never raised into a caller; ``_close`` runs exactly once, in the worker's thread when it ran,
else in ``stop``. A stopped worker stays stopped: a registry builds a new one.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, Self, TypeVar


class Worker:
    """One daemon thread that runs ``_loop`` until ``stop``; subclasses poll ``stopping`` (or sleep with
    ``_sleep``) in their loop and release their sockets in ``_close``."""

    def __init__(self, name: str) -> None:
        self.error: str | None = None
        self._stop_event = threading.Event()
        self._state_lock = threading.Lock()
        self._started = False
        self._closed = False
        self._thread = threading.Thread(target=self._main, daemon=True, name=name)

    # ------------------------------------------------------------------ lifecycle
    def start(self) -> Self:
        """Start the thread (once; later calls, or a call after ``stop``, do nothing)."""
        with self._state_lock:
            if self._started or self._stop_event.is_set():
                return self
            self._started = True
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Ask the loop to end and wait up to ``timeout_s`` for the thread; close at once if it never ran."""
        self._stop_event.set()
        with self._state_lock:
            started = self._started
        if not started:
            self._close_once()
        elif threading.current_thread() is not self._thread and self._thread.is_alive():
            self._thread.join(timeout_s)

    @property
    def alive(self) -> bool:
        """True while the thread runs."""
        return self._thread.is_alive()

    @property
    def stopping(self) -> bool:
        """True once ``stop`` was called."""
        return self._stop_event.is_set()

    def _sleep(self, seconds: float) -> bool:
        """Wait up to ``seconds``, waking early on ``stop``; True if stop was requested."""
        return self._stop_event.wait(max(0.0, seconds))

    # ------------------------------------------------------------------ for subclasses
    def _loop(self) -> None:
        raise NotImplementedError

    def _close(self) -> None:
        """Release what ``__init__`` acquired (sockets, contexts); runs exactly once."""

    # ------------------------------------------------------------------ internals
    def _main(self) -> None:
        try:
            self._loop()
        except Exception as exc:  # noqa: BLE001 - kept for status, never raised into a page
            first = str(exc).strip().splitlines()
            self.error = f"{type(exc).__name__}: {first[0] if first else ''}".rstrip(": ")
        finally:
            self._close_once()

    def _close_once(self) -> None:
        with self._state_lock:
            if self._closed:
                return
            self._closed = True
        self._close()


K = TypeVar("K", bound=Hashable)
W = TypeVar("W", bound=Worker)


class WorkerRegistry(Generic[K, W]):
    """The process-wide workers by key, at most ``limit`` at once. Invariants: ``get`` returns a started,
    alive worker (a dead one is forgotten and replaced); when a new key finds the registry full it either
    stops the least recently used worker (``evict=True``) or raises ValueError, leaving the others running."""

    def __init__(self, limit: int, evict: bool) -> None:
        self.limit = limit
        self.evict = evict
        self._workers: OrderedDict[K, W] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K, factory: Callable[[], W], full: Callable[[list[K]], str] | None = None) -> W:
        """The running worker for ``key``, built by ``factory`` and started when there is none (or it died).
        ``full`` words the ValueError of a full, non-evicting registry from the keys that run."""
        evicted: list[W] = []
        with self._lock:
            for dead in [k for k, w in self._workers.items() if not w.alive]:
                del self._workers[dead]
            worker = self._workers.get(key)
            if worker is None:
                if not self.evict and len(self._workers) >= self.limit:
                    keys = list(self._workers)
                    raise ValueError(full(keys) if full else f"{len(keys)} workers already run")
                worker = self._workers[key] = factory().start()
            self._workers.move_to_end(key)
            while len(self._workers) > self.limit:
                evicted.append(self._workers.popitem(last=False)[1])
        for old in evicted:
            old.stop(timeout_s=0.5)
        return worker

    def running(self, key: K) -> W | None:
        """The worker for ``key`` if it is alive, else None."""
        with self._lock:
            worker = self._workers.get(key)
        return worker if worker is not None and worker.alive else None

    def pop(self, key: K) -> W | None:
        """Forget the worker for ``key`` and return it (the caller stops it); None if there is none."""
        with self._lock:
            return self._workers.pop(key, None)
