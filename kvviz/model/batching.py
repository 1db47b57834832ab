"""Continuous batching: one scheduler in front of the model gathers the forward passes that sessions ask
for and runs them together.

A caller ``submit``s one request (its new tokens after its own cached prefix) and blocks until its
result. One worker thread per scheduler takes requests first come, first served: while a forward pass
runs, new requests queue; when it ends, the queue's head and the requests behind it (up to a token
budget) run in the next pass. An idle scheduler lets a lone request wait at most ``max_wait_s`` for
companions, longer only while requests announced by ``expect`` are on their way (at most the time
given there). A request marked ``alone`` (a timed probe) always runs in a pass of its own.

Invariants: every submitted request completes exactly once, with its own result or its own error (an
error of the whole pass goes to every caller in that pass, and the worker goes on); a pass holds the
head of the queue plus followers in arrival order whose new tokens fit ``max_tokens`` (the head alone
may exceed it); no ``alone`` request shares a pass; ``history`` keeps the last passes for the timeline.
The clock and the wait are injectable so tests are deterministic.
"""

from __future__ import annotations

import contextvars
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kvviz.settings import DEFAULT_BATCH_TOKENS, DEFAULT_BATCH_WAIT_MS, settings

ENV_BATCH_TOKENS = "KVVIZ_BATCH_TOKENS"
ENV_BATCH_WAIT_MS = "KVVIZ_BATCH_WAIT_MS"
HISTORY = 60


@dataclass(frozen=True)
class Origin:
    """Who asked for a forward pass: a ``tag`` (``room``, ``edit``, ``probe``, ...), an ``owner`` (a
    session id, never shown) and whether it must run ``alone``."""

    tag: str = "other"
    owner: str | None = None
    alone: bool = False


_NO_ORIGIN = Origin()  # frozen, so a safe shared default
_ORIGIN: contextvars.ContextVar[Origin] = contextvars.ContextVar("kvviz_batch_origin", default=_NO_ORIGIN)


@contextmanager
def batch_origin(tag: str, owner: str | None = None, *, alone: bool = False) -> Iterator[None]:
    """Every forward pass this thread asks for inside the block carries this origin; ``alone`` runs each
    of them in a pass of its own (a timed measurement must not share the model with anyone)."""
    token = _ORIGIN.set(Origin(tag, owner, alone or _ORIGIN.get().alone))
    try:
        yield
    finally:
        _ORIGIN.reset(token)


def current_origin() -> Origin:
    return _ORIGIN.get()


@dataclass
class Request:
    """One queued forward request: ``payload`` goes to the runner; ``new_tokens`` count against the
    budget; ``past_tokens`` are the cached prefix it continues (shown, never computed)."""

    payload: Any
    new_tokens: int
    past_tokens: int
    origin: Origin
    arrived: float
    done: threading.Event = field(default_factory=threading.Event)
    result: Any = None
    error: BaseException | None = None
    wait_ms: float = 0.0
    pass_ms: float = 0.0
    share_ms: float = 0.0
    pass_id: int = 0
    batch_size: int = 0


@dataclass(frozen=True)
class Completed:
    """A request's result and how it was served: ``wait_ms`` queued, ``pass_ms`` the whole pass it rode in,
    ``share_ms`` its share of that pass by new tokens (= ``pass_ms`` alone), ``batch_size`` requests in it."""

    result: Any
    wait_ms: float
    pass_ms: float
    share_ms: float
    batch_size: int
    pass_id: int


@dataclass(frozen=True)
class PassItem:
    """One request inside a recorded pass (no payload, no text)."""

    tag: str
    owner: str | None
    past_tokens: int
    new_tokens: int
    wait_ms: float
    alone: bool
    ok: bool


@dataclass(frozen=True)
class PassRecord:
    """One forward pass: when it started (``time.time()``), how long it took, and its requests in order.
    ``padding_tokens``: what a padded batch (every request padded to the longest) would have computed
    on top; this scheduler packs the tokens, so no weight matrix computes them (only attention pads
    unequal requests, masked: ``kvviz.model.packing``)."""

    pass_id: int
    started_at: float
    ms: float
    items: tuple[PassItem, ...]

    @property
    def batch_size(self) -> int:
        return len(self.items)

    @property
    def new_tokens(self) -> int:
        return sum(i.new_tokens for i in self.items)

    @property
    def past_tokens(self) -> int:
        return sum(i.past_tokens for i in self.items)

    @property
    def padding_tokens(self) -> int:
        longest = max((i.new_tokens for i in self.items), default=0)
        return longest * len(self.items) - self.new_tokens


RunBatch = Callable[[list[Any]], Sequence[Any]]


def settings_from_env() -> tuple[int, float]:
    """(token budget, max wait in seconds) from ``KVVIZ_BATCH_TOKENS`` (0..65536; 0 = one request a
    pass) and ``KVVIZ_BATCH_WAIT_MS`` (0..1000); invalid values fall back to 512 and 4 ms."""
    parsed = settings()  # kvviz.settings: parsed once, invalid values already replaced by the defaults
    return parsed.batch_tokens, parsed.batch_wait_s


class BatchScheduler:
    """Gathers concurrent forward requests into passes (module docstring: rules and invariants).

    ``run_batch(payloads)`` returns one entry per payload: its result, or an exception instance that is
    raised in that caller only. ``max_requests`` 1 (or ``max_tokens`` 0) means one request a pass."""

    def __init__(self, run_batch: RunBatch, *, max_tokens: int = DEFAULT_BATCH_TOKENS,
                 max_wait_s: float = DEFAULT_BATCH_WAIT_MS / 1000.0, max_requests: int = 64,
                 history: int = HISTORY, clock: Callable[[], float] = time.perf_counter,
                 wait: Callable[[threading.Condition, float], object] | None = None, name: str = "kvviz-batch") -> None:
        self._run_batch = run_batch
        self.max_tokens = max(0, int(max_tokens))
        self.max_wait_s = max(0.0, float(max_wait_s))
        self.max_requests = 1 if self.max_tokens == 0 else max(1, int(max_requests))
        self._clock = clock
        self._wait = wait or (lambda cond, timeout: cond.wait(timeout))
        self._cond = threading.Condition(threading.Lock())
        self._queue: deque[Request] = deque()
        self._history: deque[PassRecord] = deque(maxlen=history)
        self._ids = itertools.count(1)
        self._closed = False
        self._busy = False
        self._expected = 0  # requests announced by ``expect`` that have not arrived yet
        self._expect_until = 0.0
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ callers

    def submit(self, payload: Any, new_tokens: int, past_tokens: int = 0, origin: Origin | None = None,
               on_queued: Callable[[], None] | None = None) -> Completed:
        """Queue one request and block until its pass ran; raises that request's error. ``on_queued`` runs
        once the request is in the queue (anything queued after it rides in its pass or a later one)."""
        req = Request(payload, max(1, int(new_tokens)), max(0, int(past_tokens)), origin or current_origin(),
                      self._clock())
        with self._cond:
            if self._closed:
                raise RuntimeError("the batching scheduler is closed")
            self._queue.append(req)
            self._expected = max(0, self._expected - 1)
            self._cond.notify_all()
        if on_queued is not None:
            on_queued()
        req.done.wait()
        if req.error is not None:
            raise req.error
        return Completed(req.result, req.wait_ms, req.pass_ms, req.share_ms, req.batch_size, req.pass_id)

    def expect(self, requests: int, within_s: float) -> None:
        """``requests`` more requests are about to arrive (prompts that will borrow a queued request's
        prefix): the next pass waits for them, at most ``within_s`` from now."""
        if requests <= 0 or within_s <= 0:
            return
        with self._cond:
            self._expected += int(requests)
            self._expect_until = max(self._expect_until, self._clock() + float(within_s))
            self._cond.notify_all()

    def history(self, limit: int | None = None) -> list[PassRecord]:
        """The last passes, oldest first."""
        with self._cond:
            passes = list(self._history)
        return passes if limit is None else passes[-limit:]

    def queued(self) -> int:
        with self._cond:
            return len(self._queue)

    def close(self) -> None:
        """Stop the worker after the queued requests ran."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=5)

    # ------------------------------------------------------------------ the worker

    def _full(self) -> bool:
        """The queue already holds a full pass (budget or request count reached, or an alone request)."""
        tokens = 0
        for n, req in enumerate(self._queue):
            if req.origin.alone or n + 1 >= self.max_requests:
                return True
            tokens += req.new_tokens
            if tokens >= self.max_tokens:
                return True
        return False

    def _take(self) -> list[Request]:
        """The next pass: the head, then followers in order while they fit (the caller holds the lock)."""
        head = self._queue.popleft()
        batch = [head]
        if head.origin.alone:
            return batch
        tokens = head.new_tokens
        while self._queue and len(batch) < self.max_requests:
            nxt = self._queue[0]
            if nxt.origin.alone or tokens + nxt.new_tokens > self.max_tokens:
                break
            batch.append(self._queue.popleft())
            tokens += nxt.new_tokens
        return batch

    def _next_batch(self) -> list[Request] | None:
        with self._cond:
            while not self._queue and not self._closed:
                self._cond.wait()
            if not self._queue:
                return None
            deadline = self._queue[0].arrived + self.max_wait_s
            while not self._closed and not self._full():
                until = max(deadline, self._expect_until) if self._expected else deadline
                remaining = until - self._clock()
                if remaining <= 0:
                    break
                self._wait(self._cond, remaining)
            if self._clock() >= self._expect_until:
                self._expected = 0
            self._busy = True
            return self._take()

    def _loop(self) -> None:
        while True:
            batch = self._next_batch()
            if batch is None:
                return
            self._run(batch)

    def _run(self, batch: list[Request]) -> None:
        start = self._clock()
        started_at = time.time()
        for req in batch:
            req.wait_ms = max(0.0, (start - req.arrived) * 1000.0)
        try:
            outs: Sequence[Any] = self._run_batch([r.payload for r in batch])
            if len(outs) != len(batch):
                raise RuntimeError(f"the forward pass returned {len(outs)} results for {len(batch)} requests")
        except BaseException as exc:  # noqa: BLE001 - delivered to every caller of this pass
            outs = [exc] * len(batch)
        ms = (self._clock() - start) * 1000.0
        pass_id = next(self._ids)
        total = sum(r.new_tokens for r in batch)
        for req, out in zip(batch, outs, strict=True):
            if isinstance(out, BaseException):
                req.error = out
            else:
                req.result = out
            req.pass_ms, req.pass_id, req.batch_size = ms, pass_id, len(batch)
            req.share_ms = ms * req.new_tokens / total
        record = PassRecord(pass_id, started_at, ms, tuple(
            PassItem(r.origin.tag, r.origin.owner, r.past_tokens, r.new_tokens, r.wait_ms, r.origin.alone,
                     r.error is None) for r in batch))
        with self._cond:
            self._history.append(record)
            self._busy = False
        for req in batch:
            req.done.set()


__all__ = [
    "DEFAULT_BATCH_TOKENS",
    "DEFAULT_BATCH_WAIT_MS",
    "ENV_BATCH_TOKENS",
    "ENV_BATCH_WAIT_MS",
    "BatchScheduler",
    "Completed",
    "Origin",
    "PassItem",
    "PassRecord",
    "batch_origin",
    "current_origin",
    "settings_from_env",
]
