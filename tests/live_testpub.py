"""A KV-event publisher for tests, written from vLLM's wire format alone (not from kvviz's codec):
msgspec structs mirroring ``vllm/distributed/kv_events.py`` of vLLM 0.33.0 (tagged, omit_defaults; the
batch ``array_like`` with tagged-map events as 0.33.0 sends them, or maps / arrays throughout as older
publishers do), an XPUB socket (so a test can wait until the subscriber's subscription arrived), and a
ROUTER replay socket answering ``[id, b"", seq]`` in 0.33.0's layout (``[id, b"", topic, seq, payload]``
per batch, then ``[id, b"", b"", -1, b""]``) or the older one (``[id, b"", seq, payload]``, then
``[id, b"", -1, b""]``). With ``connect=True`` the PUB socket connects to a listening subscriber, as
vLLM's does when its endpoint names a specific address (its replay socket still binds)."""

# No "from __future__ import annotations": msgspec resolves the local structs' annotations at run time.

import socket
import threading
import time
from typing import Any

import msgspec
import zmq


def free_port(pair: int = 1) -> int:
    """A free 127.0.0.1 TCP port such that ``pair`` consecutive ports are free."""
    for _ in range(200):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port + pair > 65535:
            continue
        ok = True
        for p in range(port + 1, port + pair):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    ok = False
        if ok:
            return port
    raise RuntimeError("no free port")


def structs(form: bool | str) -> dict[str, Any]:
    """vLLM's event structs, re-declared from the wire format: ``"vllm"`` (0.33.0: the batch an array,
    events tagged maps), ``False``/``"map"`` (maps throughout) or ``True``/``"array"`` (arrays throughout)."""
    form = {False: "map", True: "array"}.get(form, form)  # type: ignore[call-overload]
    batch_kw: dict[str, Any] = {"omit_defaults": True, "array_like": form in ("vllm", "array")}
    event_kw: dict[str, Any] = {"omit_defaults": True, "array_like": form == "array"}

    class EventBatch(msgspec.Struct, **batch_kw):
        ts: float
        events: list[Any]
        data_parallel_rank: int | None = None

    class KVCacheEvent(msgspec.Struct, tag=True, **event_kw):
        pass

    class BlockStored(KVCacheEvent):
        block_hashes: list[bytes | int]
        parent_block_hash: bytes | int | None
        token_ids: list[int]
        block_size: int
        lora_id: int | None
        medium: str | None
        lora_name: str | None
        extra_keys: list[Any] | None = None
        group_idx: int | None = None
        kv_cache_spec_kind: str | None = None
        kv_cache_spec_sliding_window: int | None = None
        locality: str | None = None
        ownership: str | None = None
        session_id: str | None = None
        lookahead_token_ids: list[list[int]] | None = None

    class BlockRemoved(KVCacheEvent):
        block_hashes: list[bytes | int]
        medium: str | None
        group_idx: int | None = None
        locality: str | None = None
        ownership: str | None = None

    class AllBlocksCleared(KVCacheEvent):
        pass

    class KVEventBatch(EventBatch):
        events: list[BlockStored | BlockRemoved | AllBlocksCleared]

    return {"EventBatch": KVEventBatch, "BlockStored": BlockStored, "BlockRemoved": BlockRemoved,
            "AllBlocksCleared": AllBlocksCleared}


def h(i: int, int_hashes: bool = False) -> bytes | int:
    """A made-up 32-byte block hash (or its int form: the low 64 bits, big-endian)."""
    b = i.to_bytes(32, "big")
    return int.from_bytes(b, "big") & ((1 << 64) - 1) if int_hashes else b


class WirePublisher:
    """Publishes explicit batches with explicit sequence numbers; ``send=False`` keeps a batch only in
    the replay buffer (a message the subscriber never saw live)."""

    def __init__(self, port: int, replay_port: int | None = None, *, array_like: bool | None = None,
                 form: str = "vllm", replay_layout: str = "0.33", int_hashes: bool = False,
                 rank: int | None = None, topic: bytes = b"", connect: bool = False) -> None:
        self.s = structs(form if array_like is None else array_like)
        self.replay_layout = replay_layout  # "0.33" or "legacy"
        self.int_hashes = int_hashes
        self.rank = rank
        self.topic = topic
        self.seq = 0
        self.buffer: list[tuple[int, bytes]] = []
        self.ctx = zmq.Context()
        self.pub = self.ctx.socket(zmq.XPUB)
        self.pub.setsockopt(zmq.LINGER, 0)
        (self.pub.connect if connect else self.pub.bind)(f"tcp://127.0.0.1:{port}")
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self.replays_served = threading.Semaphore(0)
        self._thread = None
        if replay_port is not None:
            self.router = self.ctx.socket(zmq.ROUTER)
            self.router.setsockopt(zmq.LINGER, 0)
            self.router.bind(f"tcp://127.0.0.1:{replay_port}")
            self._thread = threading.Thread(target=self._serve, daemon=True)
            self._thread.start()

    def wait_subscribed(self, timeout_s: float = 20.0) -> None:
        """Block until a subscriber's subscription reached this socket."""
        if not self.pub.poll(int(timeout_s * 1000)):
            raise TimeoutError("no subscriber connected")
        self.pub.recv()

    def wait_replay_served(self, timeout_s: float = 20.0) -> None:
        """Block until one more replay request was answered."""
        if not self.replays_served.acquire(timeout=timeout_s):
            raise TimeoutError("no replay request")

    def stored(self, ids: list[int], parent: int | None, tokens: list[int], block_size: int = 4, **kw: Any) -> Any:
        p = None if parent is None else h(parent, self.int_hashes)
        return self.s["BlockStored"]([h(i, self.int_hashes) for i in ids], p, tokens, block_size,
                                     kw.pop("lora_id", None), kw.pop("medium", "GPU"), kw.pop("lora_name", None), **kw)

    def removed(self, ids: list[int], medium: str | None = "GPU", **kw: Any) -> Any:
        return self.s["BlockRemoved"]([h(i, self.int_hashes) for i in ids], medium, **kw)

    def cleared(self) -> Any:
        return self.s["AllBlocksCleared"]()

    def payload(self, events: list[Any]) -> bytes:
        return msgspec.msgpack.encode(self.s["EventBatch"](time.time(), events, self.rank))

    def publish(self, events: list[Any], send: bool = True) -> int:
        seq, self.seq = self.seq, self.seq + 1
        payload = self.payload(events)
        with self._lock:
            self.buffer.append((seq, payload))
        if send:
            self.pub.send_multipart([self.topic, seq.to_bytes(8, "big"), payload])
        return seq

    def send_raw(self, frames: list[bytes]) -> None:
        self.pub.send_multipart(frames)

    def _serve(self) -> None:
        while not self._stop.is_set():
            if not self.router.poll(50):
                continue
            frames = self.router.recv_multipart()
            if len(frames) != 3:
                continue
            client, _, start = frames
            first = int.from_bytes(start, "big")
            with self._lock:
                buffered = list(self.buffer)
            end = (-1).to_bytes(8, "big", signed=True)
            for seq, payload in buffered:
                if seq >= first:
                    if self.replay_layout == "0.33":
                        self.router.send_multipart([client, b"", self.topic, seq.to_bytes(8, "big"), payload])
                    else:
                        self.router.send_multipart([client, b"", seq.to_bytes(8, "big"), payload])
            if self.replay_layout == "0.33":
                self.router.send_multipart([client, b"", b"", end, b""])
            else:
                self.router.send_multipart([client, b"", end, b""])
            self.replays_served.release()

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
            self.router.close(0)
        self.pub.close(0)
        self.ctx.term()
