"""A background subscriber to an engine's KV-cache events: SUB sockets for the live stream, a DEALER
client for the replay socket, gap detection, reconnects, and the ``EngineModel`` they feed.

Two topologies, as vLLM 0.33.0's ``ZmqEventPublisher`` (``vllm/distributed/kv_events.py``) decides
them from its endpoint: it binds its PUB socket when the endpoint names ``*``, ``::``, ipc or inproc
(kvviz connects: ``LiveConfig(listen=False)``) and connects it to any other address (kvviz must listen
there: ``listen=True`` binds the SUB sockets). Its replay ROUTER always binds; kvviz always connects to it.

One thread per (endpoint, replay endpoint, topic, DP size) per process (``shared``), so every browser
session reads the same state and none of them ever blocks on a socket. Invariants: each (rank, sequence
number) is applied at most once and in increasing order per rank; ``missed`` counts the sequence numbers
after a rank's first one that neither the live stream nor the replay delivered; a malformed message is
counted in ``decode_errors`` and skipped.
"""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import zmq

from kvviz.errors import CodedError
from kvviz.fleet.engine_model import DEFAULT_MAX_BLOCKS, EngineModel, PromptStatus, StoreNote, prompt_status
from kvviz.fleet.wire import (
    AllBlocksCleared,
    EventBatch,
    WireError,
    decode_message,
    decode_replay,
    encode_seq,
    offset_endpoint_port,
)
from kvviz.fleet.worker import Worker, WorkerRegistry
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE

POLL_MS = 100
REPLAY_TIMEOUT_S = 2.0
MAX_REPLAY_MESSAGES = 20_000
MAX_DP_SIZE = 64
MAX_MESSAGE_BYTES = 32 * 2**20  # a larger ZeroMQ message drops the connection instead of filling memory
RCVHWM = 100_000  # messages queued per SUB socket before ZeroMQ drops newer ones
RECEIVING_S = 5.0  # a message within this many seconds: the status is "receiving"
_ENDPOINT = re.compile(r"tcp://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})")


def check_endpoint(endpoint: str, flag: str = "endpoint", dp_size: int = 1) -> str:
    """``endpoint`` if it is ``tcp://HOST:PORT`` with a port that leaves room for ``dp_size`` ranks;
    ValueError (one line) otherwise. ``*`` is a bind address: the engine binds, kvviz connects."""
    value = (endpoint or "").strip()
    m = _ENDPOINT.fullmatch(value)
    if "*" in value:
        raise CodedError(f"{flag} {value!r}: '*' is the engine's bind address; connect to its host, "
                         "e.g. tcp://127.0.0.1:5557", "endpoint_bind_address", flag=flag, value=value[:80])
    return _check_port(value, m, flag, dp_size)


def check_listen_endpoint(endpoint: str, flag: str = "listen endpoint", dp_size: int = 1) -> str:
    """``endpoint`` if kvviz can bind its SUB socket there: ``tcp://ADDRESS:PORT`` (an address of this
    machine; ``*`` for every interface) with room for ``dp_size`` ranks; ValueError (one line) otherwise."""
    value = (endpoint or "").strip()
    m = _ENDPOINT.fullmatch(value.replace("tcp://*:", "tcp://0.0.0.0:", 1))
    if m is None:
        raise CodedError(f"{flag} {value[:80]!r} is not tcp://ADDRESS:PORT (e.g. tcp://127.0.0.1:5800)",
                         "listen_not_tcp", flag=flag, value=value[:80])
    return _check_port(value, m, flag, dp_size)


def _check_port(value: str, m: re.Match[str] | None, flag: str, dp_size: int) -> str:
    if m is None:
        raise CodedError(f"{flag} {value[:80]!r} is not tcp://HOST:PORT (e.g. tcp://127.0.0.1:5557)",
                         "endpoint_not_tcp", flag=flag, value=value[:80])
    port = int(m.group(2))
    if not 1 <= port <= 65535 - (dp_size - 1):
        raise CodedError(f"{flag} {value!r}: port must be in 1..{65535 - (dp_size - 1)}", "port_range",
                         flag=flag, value=value[:80], high=65535 - (dp_size - 1))
    return value


@dataclass(frozen=True)
class LiveConfig:
    """What to subscribe to: the PUB endpoint (``listen``: the address kvviz binds and the engine
    connects to), the optional replay (ROUTER) endpoint, the topic and the number of data-parallel
    ranks (rank N publishes on port + N)."""

    endpoint: str
    replay_endpoint: str | None = None
    topic: str = ""
    dp_size: int = 1
    listen: bool = False

    def validated(self) -> LiveConfig:
        if isinstance(self.dp_size, bool) or not isinstance(self.dp_size, int) or not 1 <= self.dp_size <= MAX_DP_SIZE:
            raise ValueError(f"DP size must be in 1..{MAX_DP_SIZE}, got {self.dp_size!r}")
        replay = (self.replay_endpoint or "").strip() or None
        endpoint = (check_listen_endpoint(self.endpoint, "listen endpoint", self.dp_size) if self.listen
                    else check_endpoint(self.endpoint, "endpoint", self.dp_size))
        return LiveConfig(endpoint, check_endpoint(replay, "replay endpoint", self.dp_size) if replay else None,
                          self.topic or "", self.dp_size, bool(self.listen))


@dataclass
class RankState:
    """Sequence bookkeeping of one DP rank's stream."""

    first_seq: int | None = None
    last_seq: int | None = None  # last applied
    cleared: bool = False  # an AllBlocksCleared was applied: from there on the view is whole
    live_last: int | None = None  # last seen on the live socket (a drop below it = publisher restart)
    connected: bool = False  # a connection is up (listening: at least one engine connected to us)
    peers: int = 0  # listening: engines connected now
    since: float = field(default_factory=time.time)  # when ``connected`` last changed (or the state began)

    @property
    def whole(self) -> bool:
        """Every block this rank holds was stored in a batch kvviz applied: it applied the engine's first
        batch (0, live or replayed), or a clear of the whole cache."""
        return self.first_seq == 0 or self.cleared


@dataclass
class Counters:
    """Subscriber totals beyond what the model counts."""

    replayed: int = 0
    missed: int = 0
    decode_errors: int = 0
    duplicates: int = 0
    restarts: int = 0
    reconnects: int = 0
    replay_requests: int = 0
    gaps_filled: int = 0  # gaps in the live stream whose every missing batch the replay delivered
    replays_ended: int = 0  # replies that ended on the publisher's end marker
    replay_timeouts: int = 0  # replies cut short by replay_timeout_s (or the message cap)
    replay_layout: str | None = None  # the layout the last replay reply came in (wire.REPLAY_*)
    last_error: str | None = None
    last_message_at: float | None = None
    ranks: dict[int, RankState] = field(default_factory=dict)


class Subscriber(Worker):
    """Subscribes to one engine in its ``Worker`` thread; read it through ``lock`` or the helpers."""

    def __init__(self, config: LiveConfig, max_blocks: int = DEFAULT_MAX_BLOCKS, max_batches: int | None = None,
                 replay_timeout_s: float = REPLAY_TIMEOUT_S, rcvhwm: int = RCVHWM) -> None:
        self.config = config.validated()
        self.model = EngineModel(max_blocks)
        self.counters = Counters(ranks={r: RankState() for r in range(self.config.dp_size)})
        self.lock = threading.Lock()
        self.max_batches = max_batches
        self.replay_timeout_s = replay_timeout_s
        self.started_at = time.time()
        self.last_topic: bytes | None = None  # the topic frame of the last good live message
        self.done = threading.Event()
        self._ctx = zmq.Context()
        # Sockets are created here so that a bad endpoint (or a busy port) fails in the caller, not in the thread.
        self._subs: list[zmq.Socket] = []
        self._monitors: list[zmq.Socket] = []
        listen = self.config.listen
        up = zmq.EVENT_ACCEPTED if listen else zmq.EVENT_CONNECTED
        try:
            for rank in range(self.config.dp_size):
                sub = self._ctx.socket(zmq.SUB)
                sub.setsockopt(zmq.LINGER, 0)
                sub.setsockopt(zmq.RCVHWM, rcvhwm)
                sub.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
                sub.setsockopt(zmq.SUBSCRIBE, self.config.topic.encode())
                sub.setsockopt(zmq.IPV6, int("[" in self.config.endpoint))
                self._monitors.append(sub.get_monitor_socket(up | zmq.EVENT_DISCONNECTED))
                self._subs.append(sub)
                (sub.bind if listen else sub.connect)(offset_endpoint_port(self.config.endpoint, rank))
        except zmq.ZMQError as exc:
            self._close()
            verb = "listen on" if listen else "connect to"
            raise ValueError(f"cannot {verb} {self.config.endpoint}: {exc}") from None
        super().__init__(f"kvviz-live {self.config.endpoint}")

    # ------------------------------------------------------------------ lifecycle (see Worker)
    def wait(self, timeout_s: float) -> bool:
        """Block until ``max_batches`` were applied or ``timeout_s`` passed; True if reached."""
        return self.done.wait(timeout_s)

    def _close(self) -> None:
        for s in self._subs + self._monitors:
            s.close(linger=0)
        self._ctx.term()

    def _loop(self) -> None:
        poller = zmq.Poller()
        for s in self._subs + self._monitors:
            poller.register(s, zmq.POLLIN)
        try:
            while not self.stopping and not self.done.is_set():
                ready = dict(poller.poll(POLL_MS))
                for rank, mon in enumerate(self._monitors):
                    if mon in ready:
                        self._on_monitor(rank, mon)
                for rank, sub in enumerate(self._subs):
                    if sub in ready:
                        self._on_live(rank, sub.recv_multipart())
                with self.lock:
                    self.model.tick(time.time())
        except zmq.ZMQError as exc:  # context gone: nothing left to do
            self.counters.last_error = str(exc)

    # ------------------------------------------------------------------ live stream
    def _on_monitor(self, rank: int, mon: zmq.Socket) -> None:
        from zmq.utils.monitor import recv_monitor_message

        event = recv_monitor_message(mon)["event"]
        state = self.counters.ranks[rank]
        if event in (zmq.EVENT_CONNECTED, zmq.EVENT_ACCEPTED):  # we reached the engine / it reached us
            if state.last_seq is not None:
                self.counters.reconnects += 1
            state.peers += 1
            state.connected, state.since = True, time.time()
            if self.config.replay_endpoint:  # catch up on what was published while we were away
                self._replay(rank, 0 if state.last_seq is None else state.last_seq + 1, None)
        elif event == zmq.EVENT_DISCONNECTED:
            state.peers = max(state.peers - 1, 0)
            if not state.peers:
                state.connected, state.since = False, time.time()

    def _on_live(self, rank: int, frames: list[bytes]) -> None:
        self.counters.last_message_at = time.time()
        try:
            msg = decode_message(frames)
        except WireError as exc:
            self._bad(exc)
            return
        self.last_topic = msg.topic
        state = self.counters.ranks[rank]
        if state.live_last is not None and msg.seq <= state.live_last:
            self._restart(rank)  # the engine's sequence counter started over
            state = self.counters.ranks[rank]
        state.live_last = msg.seq
        if state.last_seq is None and msg.seq > 0 and self.config.replay_endpoint:
            self._replay(rank, 0, msg.seq)
        elif state.last_seq is not None and msg.seq > state.last_seq + 1 and self.config.replay_endpoint:
            self._replay(rank, state.last_seq + 1, msg.seq)
        self._accept(rank, msg.seq, msg.batch, replayed=False)

    def _restart(self, rank: int) -> None:
        with self.lock:
            self.counters.restarts += 1
            self.model.clear_rank(rank)
            self.counters.ranks[rank] = RankState(connected=True, peers=self.counters.ranks[rank].peers)

    def _bad(self, exc: Exception) -> None:
        with self.lock:
            self.counters.decode_errors += 1
            self.counters.last_error = str(exc)[:200]

    def _accept(self, rank: int, seq: int, batch: EventBatch, replayed: bool) -> bool:
        """Apply a batch unless this rank already applied ``seq`` (False then); count the gap before it
        as missed."""
        with self.lock:
            state = self.counters.ranks[rank]
            if self.done.is_set():
                return False
            if state.last_seq is not None and seq <= state.last_seq:
                self.counters.duplicates += 1
                return False
            if state.last_seq is not None and seq > state.last_seq + 1:
                self.counters.missed += seq - state.last_seq - 1
            if state.first_seq is None:
                state.first_seq = seq
            state.last_seq = seq
            self.counters.replayed += replayed
            self.model.apply(batch, time.time())
            state.cleared = state.cleared or any(isinstance(e, AllBlocksCleared) for e in batch.batch.events)
            if self.max_batches is not None and self.model.batches >= self.max_batches:
                self.done.set()
            return True

    # ------------------------------------------------------------------ replay
    def _replay(self, rank: int, start: int, stop: int | None) -> None:
        """Ask rank ``rank``'s replay socket for batches from ``start`` on and apply those below
        ``stop`` (all when None), in order. Bounded by ``replay_timeout_s`` and a message cap."""
        assert self.config.replay_endpoint
        self.counters.replay_requests += 1
        dealer = self._ctx.socket(zmq.DEALER)
        dealer.setsockopt(zmq.LINGER, 0)
        try:
            dealer.connect(offset_endpoint_port(self.config.replay_endpoint, rank))
            dealer.send_multipart([b"", encode_seq(start)])
            deadline = time.monotonic() + self.replay_timeout_s
            ended, filled = False, 0
            for _ in range(MAX_REPLAY_MESSAGES):
                left_ms = int((deadline - time.monotonic()) * 1000)
                if left_ms <= 0 or self.stopping or not dealer.poll(left_ms):
                    break
                try:
                    reply = decode_replay(dealer.recv_multipart())
                except WireError as exc:
                    self._bad(exc)
                    continue
                self.counters.replay_layout = reply.layout
                if reply.topic:
                    self.last_topic = reply.topic
                if reply.batch is None:  # the end marker: nothing more is coming
                    ended = True
                    break
                if reply.seq >= start and (stop is None or reply.seq < stop):
                    filled += self._accept(rank, reply.seq, reply.batch, replayed=True)
            with self.lock:
                if stop is not None and filled == stop - start:
                    self.counters.gaps_filled += 1
                if ended:
                    self.counters.replays_ended += 1
                else:
                    self.counters.replay_timeouts += 1
        except zmq.ZMQError as exc:
            self.counters.last_error = f"replay: {exc}"
        finally:
            dealer.close(linger=0)

    # ------------------------------------------------------------------ reading
    def status(self) -> str:
        """``stopped``, ``receiving`` (a message in the last ``RECEIVING_S``), ``connected``, or while no
        connection is up ``connecting`` (connect mode) / ``listening`` (listen mode)."""
        if not self.alive:
            return "stopped"
        last = self.counters.last_message_at
        if last is not None and time.time() - last < RECEIVING_S:
            return "receiving"
        if any(r.connected for r in self.counters.ranks.values()):
            return "connected"
        return "listening" if self.config.listen else "connecting"

    def summary(self) -> dict[str, Any]:
        """The ``watch --json`` counters, read consistently."""
        with self.lock:
            m = self.model
            ranks = self.counters.ranks.values()
            firsts = [r.first_seq for r in ranks if r.first_seq is not None]
            lasts = [r.last_seq for r in ranks if r.last_seq is not None]
            return {
                "batches": m.batches,
                "replayed": self.counters.replayed,
                "missed": self.counters.missed,
                "decode_errors": self.counters.decode_errors,
                "events": dict(m.events),
                "cached_blocks": m.cached_blocks,
                "stored_tokens": m.stored_tokens,
                "dp_ranks": sorted(m.dp_ranks),
                "first_seq": min(firsts) if firsts else None,
                "last_seq": max(lasts) if lasts else None,
                "replay_requests": self.counters.replay_requests,
                "gaps_filled": self.counters.gaps_filled,
                "replays_ended": self.counters.replays_ended,
                "replay_timeouts": self.counters.replay_timeouts,
                "replay_layout": self.counters.replay_layout,
            }


MAX_SHARED = 8  # subscribers one server process keeps; connecting a ninth stops the least recently used
_SHARED: WorkerRegistry[LiveConfig, Subscriber] = WorkerRegistry(MAX_SHARED, evict=True)


def shared(config: LiveConfig) -> Subscriber:
    """The process-wide subscriber for ``config`` (started on first use, restarted if it died). At most
    ``MAX_SHARED`` run at once: the least recently used one beyond that is stopped."""
    config = config.validated()
    return _SHARED.get(config, lambda: Subscriber(config))


def stop_shared(config: LiveConfig) -> None:
    """Stop and forget the shared subscriber for ``config`` (no-op if none)."""
    sub = _SHARED.pop(config.validated())
    if sub is not None:
        sub.stop()


def check_prompt(sub: Subscriber, tokens: list[int], block_size: int | None, hash_name: str,
                 seed: str | None, **extra: str | None) -> PromptStatus:
    """``prompt_status`` against ``sub``'s model, read under its lock; the block size defaults to the
    engine's (from its BlockStored events), else 16. ``extra``: cache_salt, lora_name, lora_path."""
    with sub.lock:
        size = block_size or sub.model.block_size or DEFAULT_BLOCK_SIZE
        status = prompt_status(sub.model, tokens, size, hash_name, seed, **extra)
        ranks = sub.counters.ranks.values()
        return replace(status, complete=bool(ranks) and all(r.whole for r in ranks))


def check_bind_endpoint(endpoint: str, flag: str = "endpoint") -> str:
    """An address a publisher can bind: ``tcp://HOST:PORT`` or ``tcp://*:PORT``; ValueError otherwise."""
    value = (endpoint or "").strip()
    return value if value.startswith("tcp://*:") and value[8:].isdigit() and 1 <= int(value[8:]) <= 65534 \
        else check_endpoint(value, flag, 2)


@dataclass(frozen=True)
class LiveView:
    """One consistent reading of a subscriber for a page: status, the ``watch`` counters, per-second
    samples, blocks per medium, the largest prefix trees and the model's bookkeeping."""

    status: str
    summary: dict[str, Any]
    samples: list[Any]
    media: dict[str, int]
    trees: list[Any]
    overflow: int
    max_blocks: int
    unknown_kinds: int
    unknown_fields: int
    duplicates: int
    restarts: int
    reconnects: int
    block_size: int | None
    hash_kind: str | None
    last_error: str | None
    last_message_at: float | None
    localities: dict[str, int] = field(default_factory=dict)
    groups: dict[int, tuple[str | None, int | None]] = field(default_factory=dict)
    sessions: list[tuple[str, int]] = field(default_factory=list)
    recent: list[StoreNote] = field(default_factory=list)


def read_view(sub: Subscriber, trees: int = 5) -> LiveView:
    """A ``LiveView`` of ``sub`` (trees computed under its lock, so they match the counters)."""
    summary = sub.summary()
    status = sub.status()
    c = sub.counters
    with sub.lock:
        m = sub.model
        return LiveView(status, summary, m.samples(), m.blocks_by_medium(), m.largest_trees(trees), m.overflow,
                        m.max_blocks, m.unknown_kinds, m.unknown_fields, c.duplicates, c.restarts, c.reconnects,
                        m.block_size, m.hash_kind, c.last_error or sub.error, c.last_message_at,
                        m.blocks_by_locality(), dict(m.groups), m.top_sessions(), list(m.recent))
