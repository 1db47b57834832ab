"""The engine's KV-cache events on ZeroMQ, laid out as vLLM 0.33.0's ``ZmqEventPublisher``
(``vllm/distributed/kv_events.py``): a PUB socket sending ``(topic, seq, payload)`` and an optional
ROUTER replay socket that answers ``(b"", start_seq)`` with every buffered ``(b"", topic, seq, payload)``
from ``start_seq`` on, then ``(b"", b"", -1, b"")``.

The payload encoder is kvviz's (``kvviz.fleet.wire.encode_batch``), so the page's subscriber decodes
what this sends. Block hashes go out as vLLM's default sends them, 64-bit ints (``int_hashes``,
``VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1``), or as the 32-byte digests. Invariants: sequence numbers start at 0 and grow by one per batch; only the publisher
thread touches the sockets (``publish`` only queues); the replay buffer keeps the last ``buffer_steps``.
"""

from __future__ import annotations

import queue
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

import zmq

from kvviz.fleet.wire import END_SEQ, KVEventBatch, encode_batch, encode_seq, to_int_hashes
from kvviz.fleet.worker import Worker

BUFFER_STEPS = 10_000  # vLLM's default replay buffer (batches)
HWM = 100_000
MAX_QUEUE = 100_000
POLL_S = 0.05


def replay_endpoint_for(endpoint: str, given: str | None = None) -> str | None:
    """The replay (ROUTER) address: ``given``, None for "none", else the PUB port + 1 on the same host."""
    if given is not None and given.strip().lower() == "none":
        return None
    if given and given.strip():
        return given.strip()
    base, _, port = endpoint.rpartition(":")
    return f"{base}:{int(port) + 1}"


class KVEventPublisher(Worker):
    """Binds PUB (and ROUTER) at construction, so a busy port fails in the caller; publishes from its
    ``Worker`` thread. ``publish(events)`` is safe from any thread (the engine's step callback)."""

    def __init__(self, endpoint: str, replay_endpoint: str | None = None, *, topic: str = "",
                 buffer_steps: int = BUFFER_STEPS, int_hashes: bool = True) -> None:
        self.endpoint, self.replay_endpoint = endpoint, replay_endpoint
        self.int_hashes = int_hashes
        self.topic = topic.encode()
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=buffer_steps)
        self.seq = 0
        self.dropped = 0
        self._queue: queue.Queue[KVEventBatch] = queue.Queue(MAX_QUEUE)
        self._ctx = zmq.Context()
        self._router: zmq.Socket | None = None
        try:
            self._pub = self._ctx.socket(zmq.PUB)
            self._pub.setsockopt(zmq.LINGER, 0)
            self._pub.set_hwm(HWM)
            self._pub.bind(endpoint)
            if replay_endpoint:
                self._router = self._ctx.socket(zmq.ROUTER)
                self._router.setsockopt(zmq.LINGER, 0)
                self._router.setsockopt(zmq.SNDHWM, 2 * (buffer_steps + 1))
                self._router.bind(replay_endpoint)
        except zmq.ZMQError as exc:
            self._ctx.destroy(linger=0)
            raise ValueError(f"cannot bind the KV-event sockets ({endpoint}, {replay_endpoint}): {exc}") from None
        super().__init__(f"kvviz-kv-events {endpoint}")

    def publish(self, events: KVEventBatch | Sequence[Any]) -> None:
        """Queue one batch (the engine's ``KVEventBatch`` or a list of events; nothing for no events);
        counted in ``dropped`` if the queue is full."""
        if isinstance(events, KVEventBatch):
            batch = KVEventBatch(events.ts, list(events.events), events.data_parallel_rank or 0)
        else:
            batch = KVEventBatch(time.time(), list(events), 0)
        if not batch.events:
            return
        try:
            self._queue.put_nowait(batch)
        except queue.Full:
            self.dropped += 1

    def _send(self, batch: KVEventBatch) -> None:
        if self.int_hashes:
            batch = KVEventBatch(batch.ts, [to_int_hashes(e) for e in batch.events], batch.data_parallel_rank)
        payload = encode_batch(batch)  # vLLM's own form (the page's default)
        seq = self.seq
        self._pub.send_multipart([self.topic, encode_seq(seq), payload])
        self.buffer.append((seq, payload))
        self.seq += 1

    def _serve_replay(self) -> None:
        assert self._router is not None
        while self._router.poll(0):
            frames = self._router.recv_multipart()
            if len(frames) != 3 or len(frames[2]) != 8:
                continue  # not a replay request: vLLM logs and ignores it
            client, start = frames[0], int.from_bytes(frames[2], "big", signed=True)
            for seq, payload in list(self.buffer):
                if seq >= start:
                    self._router.send_multipart([client, b"", self.topic, encode_seq(seq), payload])
            self._router.send_multipart([client, b"", b"", encode_seq(END_SEQ), b""])

    def _loop(self) -> None:
        while not self.stopping:
            if self._router is not None:
                self._serve_replay()
            try:
                batch = self._queue.get(timeout=POLL_S)
            except queue.Empty:
                continue
            self._send(batch)

    def _close(self) -> None:
        self._ctx.destroy(linger=0)
