"""EngineLoop: a thread-safe serving wrapper (vLLM's AsyncLLM in spirit): one background thread steps the
engine while requests are unfinished; each submitted request gets a stream of its output deltas.

Invariant: only the loop thread calls ``engine.step``; ``submit``/``abort`` take the same lock, so the
engine is never touched by two threads at once, and every stream ends with a finished output.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from kvviz.engine.engine import LLMEngine
from kvviz.engine.request import EngineStats, RequestOutput
from kvviz.engine.sampling import SamplingParams


class RequestStream:
    """Iterate to receive a request's ``RequestOutput`` deltas; the last one has ``finished``."""

    def __init__(self, loop: EngineLoop, request_id: str) -> None:
        self.request_id = request_id
        self._loop = loop
        self._queue: queue.Queue[RequestOutput | BaseException] = queue.Queue()
        self.finished = False

    def _put(self, item: RequestOutput | BaseException) -> None:
        self._queue.put(item)

    def __iter__(self) -> Iterator[RequestOutput]:
        while not self.finished:
            item = self._queue.get()
            if isinstance(item, BaseException):
                self.finished = True
                raise item
            self.finished = item.finished
            yield item

    def result(self) -> RequestOutput:
        """Wait for the end; the final output (all tokens and text)."""
        outputs = list(self)
        return outputs[-1]

    def abort(self) -> None:
        self._loop.abort(self.request_id)


class EngineLoop:
    """Owns an engine and the one thread that steps it."""

    def __init__(self, engine: LLMEngine) -> None:
        self.engine = engine
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._idle = threading.Condition(self._lock)
        self._streams: dict[str, RequestStream] = {}
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="kvviz-engine", daemon=True)
        self._thread.start()

    def submit(self, request_id: str, prompt_token_ids: list[int], params: SamplingParams | None = None, *,
               cache_salt: str | None = None, priority: int = 0, client: str = "") -> RequestStream:
        """Queue a request (CodedError at once for bad input) and return its stream."""
        stream = RequestStream(self, request_id)
        with self._wake:
            if self._closed:
                raise RuntimeError("the engine loop is closed")
            self.engine.add_request(request_id, prompt_token_ids, params, cache_salt=cache_salt,
                                    priority=priority, client=client)
            self._streams[request_id] = stream
            self._wake.notify()
        return stream

    def abort(self, request_id: str) -> None:
        with self._wake:
            self.engine.abort_request(request_id)
            self._wake.notify()

    def stats(self) -> EngineStats:
        with self._lock:
            return self.engine.stats()

    def call(self, fn):
        """Run ``fn(engine)`` under the loop's lock (views read the engine's state between steps)."""
        with self._lock:
            return fn(self.engine)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no request is unfinished; False on timeout."""
        with self._idle:
            return self._idle.wait_for(lambda: not self.engine.has_unfinished_requests(), timeout)

    def close(self) -> None:
        with self._wake:
            self._closed = True
            for rid in list(self._streams):
                self.engine.abort_request(rid)
            self._wake.notify()
        self._thread.join(timeout=30)

    def _run(self) -> None:
        while True:
            with self._wake:
                while not self._closed and not self.engine.has_unfinished_requests():
                    self._wake.wait()
                if self._closed and not self.engine.has_unfinished_requests():
                    return
                try:
                    outputs = self.engine.step()
                except BaseException as exc:  # noqa: BLE001 - every waiting stream learns of the failure
                    for rid, stream in list(self._streams.items()):
                        stream._put(exc)
                        self.engine.abort_request(rid)
                    self._streams.clear()
                    self.engine.step()  # drains the abort outputs
                    continue
                for out in outputs:
                    stream = self._streams.get(out.request_id)
                    if stream is not None:
                        stream._put(out)
                        if out.finished:
                            del self._streams[out.request_id]
                if not self.engine.has_unfinished_requests():
                    self._idle.notify_all()


_LOOP: EngineLoop | None = None
_LOOP_LOCK = threading.Lock()


def get_engine_loop() -> EngineLoop:
    """The process-wide engine loop over the default model (loaded once), created on first use."""
    global _LOOP
    with _LOOP_LOCK:
        if _LOOP is None:
            from kvviz.engine.config import EngineConfig
            from kvviz.model import load_model

            _LOOP = EngineLoop(LLMEngine(load_model(), EngineConfig()))
        return _LOOP
