"""A demo engine: kvviz's own block manager under a seeded multi-user chat workload, publishing vLLM's
KV-cache event wire format (PUB + replay ROUTER), so the live page works without a GPU.

Events are the vLLM KV events kvviz's block pool attaches to its own step events (``BlockStored``
when full blocks are cached, ``BlockRemoved`` when a cached block is evicted). The same seed gives the
same requests, hence the same block hashes, in every run.
"""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import zmq

from kvviz.fleet.wire import (
    END_SEQ,
    FORM_VLLM,
    REPLAY_V033,
    BlockStored,
    KVCacheEvent,
    KVEventBatch,
    encode_batch,
    encode_replay,
    encode_seq,
    to_int_hashes,
)
from kvviz.fleet.worker import Worker, WorkerRegistry
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED
from kvviz.mirror.manager import KVCacheManager

DEMO_BLOCK_SIZE = 16
DEMO_NUM_BLOCKS = 160
DEMO_USERS = 8
REPLAY_BUFFER = 10_000  # batches kept for replay, as vLLM's default buffer_steps
VOCAB = 49_152
# Workload content (not UI text): shared system prompts and user turns of a small chat service.
SYSTEM_PROMPTS = (
    "You are a helpful assistant for a travel agency. Answer briefly, quote prices in euros, and always "
    "mention the cancellation policy: free cancellation up to 48 hours before departure. Suggest at most "
    "three options, cheapest first, and say which ones include breakfast and airport transfers.",
    "You are a senior Python reviewer. Point out bugs first, then style. Prefer small, concrete diffs and "
    "explain every change in one sentence. Never rewrite code that already works. Assume Python 3.11, "
    "type hints everywhere, and tests written with pytest; flag any function longer than forty lines.",
    "You are a support bot for a home router. Ask for the model number, then walk the user through the "
    "reset steps one at a time and wait for confirmation after each step. If the lights stay orange "
    "after a reset, collect the serial number and offer to open a ticket with the repair team.",
)
USER_TURNS = (
    "How much is a weekend in Lisbon for two?", "Can I change the dates later?", "What about flights?",
    "Here is my function, why does it loop forever?", "Is this list comprehension too clever?",
    "My router blinks orange.", "It is the AX3000 model.", "Done, what next?", "Thanks, that worked!",
    "Could you summarise everything so far?", "And the hotel near the river?",
)
ANSWER_TOKENS = (8, 40)  # decoded tokens per answer (min, max)


def synthetic_tokenizer(seed: int) -> Callable[[str], list[int]]:
    """Token ids for text without a model: one deterministic id per word (seeded)."""
    def tokenize(text: str) -> list[int]:
        return [random.Random(f"{seed}:{w}").randrange(VOCAB) for w in text.split()]
    return tokenize


@dataclass
class _User:
    system: int
    history: list[int] = field(default_factory=list)
    running: str | None = None
    turns: int = 0


class DemoWorkload:
    """Seeded users chatting over shared system prompts on a ``KVCacheManager``; each ``step``
    returns the vLLM events that step caused."""

    def __init__(self, seed: int = 0, tokenize: Callable[[str], list[int]] | None = None, users: int = DEMO_USERS,
                 num_blocks: int = DEMO_NUM_BLOCKS, block_size: int = DEMO_BLOCK_SIZE,
                 hash_name: str = DEFAULT_HASH, hash_seed: str = DEFAULT_SEED) -> None:
        self.rng = random.Random(seed)
        self.tokenize = tokenize or synthetic_tokenizer(seed)
        self.manager = KVCacheManager(num_blocks, block_size, hash_name, hash_seed)
        self.system_tokens = [self.tokenize(p) for p in SYSTEM_PROMPTS]
        self.turn_tokens = [self.tokenize(t) for t in USER_TURNS]
        self.users = [_User(i % len(SYSTEM_PROMPTS)) for i in range(users)]
        self._count = 0
        self._seen = 0
        self._session = ""

    def step(self) -> list[KVCacheEvent]:
        """One scheduler step: a user sends a turn, or a running answer finishes."""
        user = self.rng.choice(self.users)
        self._session = f"user-{self.users.index(user)}"
        out: list[KVCacheEvent] = []
        if user.running is None:
            if user.turns >= 6 or (user.turns and self.rng.random() < 0.15):  # conversation over: a new one
                user.history, user.turns = [], 0
            user.history += self.rng.choice(self.turn_tokens)
            self._count += 1
            rid = f"req-{self._count}"
            result = self.manager.add_request(rid, self.system_tokens[user.system] + user.history)
            out += self._new_events()
            if result.ok:
                user.running, user.turns = rid, user.turns + 1
        else:
            n = self.rng.randint(*ANSWER_TOKENS)
            answer = [self.rng.randrange(VOCAB) for _ in range(n)]
            if self.manager.append_tokens(user.running, answer).ok:
                user.history += answer
            out += self._new_events()
            self.manager.free_request(user.running)
            user.running = None
        return out + self._new_events()

    def _new_events(self) -> list[KVCacheEvent]:
        """The vLLM events the block pool attached to its new step events, in order; stores carry the
        session (the user) whose request caused them, as vLLM 0.33.0's ``session_id``."""
        log = self.manager.events
        fresh, self._seen = log[self._seen:], len(log)
        return [replace(kv, session_id=self._session) if isinstance(kv, BlockStored) else kv
                for event in fresh for kv in event.kv_events]


class DemoPublisher(Worker):
    """Binds a PUB socket (``connect``: connects it to a listening subscriber, as vLLM does with a
    specific address) and a replay ROUTER, and publishes one batch per workload step that changed the
    cache, every ``interval_s`` seconds, from its ``Worker`` thread. Sequence numbers start at 0."""

    def __init__(self, endpoint: str, replay_endpoint: str | None = None, *, topic: str = "", seed: int = 0,
                 interval_s: float = 0.2, form: str = FORM_VLLM, replay_layout: str = REPLAY_V033,
                 int_hashes: bool = False, connect: bool = False,
                 tokenize: Callable[[str], list[int]] | None = None, workload: DemoWorkload | None = None,
                 max_batches: int | None = None) -> None:
        self.workload = workload or DemoWorkload(seed, tokenize)
        self.max_batches = max_batches  # stop stepping after this many batches (replay keeps serving)
        self.interval_s = interval_s
        self.form, self.replay_layout = form, replay_layout
        self.int_hashes = int_hashes
        self.topic = topic.encode()
        self.endpoint, self.replay_endpoint = endpoint, replay_endpoint
        self.buffer: deque[tuple[int, bytes]] = deque(maxlen=REPLAY_BUFFER)
        self.seq = 0
        self._ctx = zmq.Context()
        try:
            self._pub = self._ctx.socket(zmq.PUB)
            self._pub.setsockopt(zmq.LINGER, 0)
            (self._pub.connect if connect else self._pub.bind)(endpoint)
            self._router = None
            if replay_endpoint:
                self._router = self._ctx.socket(zmq.ROUTER)
                self._router.setsockopt(zmq.LINGER, 0)
                self._router.bind(replay_endpoint)
        except zmq.ZMQError as exc:
            self._ctx.destroy(linger=0)
            raise ValueError(f"cannot bind {endpoint}: {exc}") from None
        super().__init__(f"kvviz-demo {endpoint}")

    def publish(self, events: Sequence[KVCacheEvent]) -> int:
        """Send one batch now (from the publisher's thread only); return its sequence number."""
        if self.int_hashes:
            events = [to_int_hashes(e) for e in events]
        payload = encode_batch(KVEventBatch(time.time(), list(events), 0), form=self.form)
        seq = self.seq
        self._pub.send_multipart([self.topic, encode_seq(seq), payload])
        self.buffer.append((seq, payload))
        self.seq += 1
        return seq

    def _serve_replay(self) -> None:
        assert self._router is not None
        while self._router.poll(0):
            frames = self._router.recv_multipart()
            if len(frames) != 3 or len(frames[2]) != 8:
                continue
            client, start = frames[0], int.from_bytes(frames[2], "big", signed=True)
            for seq, payload in list(self.buffer):
                if seq >= start:
                    self._router.send_multipart([client, *encode_replay(self.topic, seq, payload, self.replay_layout)])
            self._router.send_multipart([client, *encode_replay(self.topic, END_SEQ, b"", self.replay_layout)])

    def _loop(self) -> None:
        next_step = time.monotonic()
        while not self.stopping:
            if self._router is not None:
                self._serve_replay()
            now = time.monotonic()
            publishing = self.max_batches is None or self.seq < self.max_batches
            if publishing and now >= next_step:
                events = self.workload.step()
                if events:
                    self.publish(events)
                next_step = now + self.interval_s
            # past its last batch the loop only serves replay: poll every 20 ms (it used to spin)
            self._sleep(min(0.02, next_step - time.monotonic()) if publishing else 0.02)

    def _close(self) -> None:
        self._ctx.destroy(linger=0)


MAX_DEMOS = 2  # demo engines one server process runs at once
_SHARED: WorkerRegistry[str, DemoPublisher] = WorkerRegistry(MAX_DEMOS, evict=False)


def shared_demo(endpoint: str, replay_endpoint: str | None, **kwargs: object) -> DemoPublisher:
    """The process-wide demo publisher bound to ``endpoint`` (started once; restarted if it died).
    ValueError when ``MAX_DEMOS`` other demo engines already run."""
    return _SHARED.get(endpoint, lambda: DemoPublisher(endpoint, replay_endpoint, **kwargs),  # type: ignore[arg-type]
                       lambda running: f"{len(running)} demo engines already run here ({', '.join(running)}): connect to one")


def running_demo(endpoint: str) -> DemoPublisher | None:
    """The shared demo publisher on ``endpoint`` if this process runs one."""
    return _SHARED.running(endpoint)
