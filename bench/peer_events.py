"""KV events of both engines, heard on loopback: a ZeroMQ SUB that either binds on 127.0.0.1 (vLLM given a
specific address connects its PUB to it, vLLM 0.33.0 ``distributed/kv_events.py``) or connects to a PUB that
kvviz serve binds. Decoded with kvviz's own wire decoder.

Invariant: a sink only collects; ``wait_for`` returns when its count reaches the wanted number or its
deadline passes, never later.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import zmq

from kvviz.fleet.wire import Message, WireError, decode_message


@dataclass
class EventSink:
    """One SUB socket and the messages it has decoded so far (``errors``: frames that did not decode)."""

    endpoint: str
    messages: list[Message] = field(default_factory=list)
    errors: int = 0

    def __post_init__(self) -> None:
        self._ctx = zmq.Context.instance()
        self._lock = threading.Condition()
        self._stop = threading.Event()
        self._sock = self._ctx.socket(zmq.SUB)
        self._sock.setsockopt(zmq.SUBSCRIBE, b"")
        self._sock.setsockopt(zmq.LINGER, 0)
        self._thread: threading.Thread | None = None

    @classmethod
    def listening(cls) -> EventSink:
        """A SUB bound on a free loopback port (for a publisher that connects)."""
        sink = cls("")
        sink._sock.bind("tcp://127.0.0.1:*")
        sink.endpoint = sink._sock.getsockopt_string(zmq.LAST_ENDPOINT)
        return sink._start()

    @classmethod
    def connecting(cls, endpoint: str) -> EventSink:
        """A SUB connected to a publisher bound on ``endpoint``."""
        sink = cls(endpoint)
        sink._sock.connect(endpoint)
        return sink._start()

    def _start(self) -> EventSink:
        self._thread = threading.Thread(target=self._run, name="peer-events", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        while not self._stop.is_set():
            if not poller.poll(200):
                continue
            frames = self._sock.recv_multipart()
            with self._lock:
                try:
                    self.messages.append(decode_message(frames))
                except WireError:
                    self.errors += 1
                self._lock.notify_all()

    def events(self) -> list:
        """Every decoded event so far, in arrival order."""
        with self._lock:
            return [e for m in self.messages for e in m.batch.events]

    def count(self) -> int:
        return len(self.events())

    def wait_for(self, n: int, timeout: float) -> int:
        """Wait until at least ``n`` events arrived or ``timeout`` seconds passed; the count then."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                have = sum(len(m.batch.events) for m in self.messages)
                left = deadline - time.monotonic()
                if have >= n or left <= 0:
                    return have
                self._lock.wait(left)

    def wait_quiet(self, quiet_s: float, timeout: float) -> int:
        """Wait until no message arrived for ``quiet_s`` seconds (or ``timeout`` passed); the count then."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                seen = len(self.messages)
                left = deadline - time.monotonic()
                if left <= 0 or not self._lock.wait(min(quiet_s, left)) and len(self.messages) == seen:
                    return sum(len(m.batch.events) for m in self.messages)

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sock.close(linger=0)
