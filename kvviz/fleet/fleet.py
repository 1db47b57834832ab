"""A fleet of engines watched at once: one subscriber per replica (its own thread, replay, health and
capped engine model), the cluster index "block hash -> replicas holding it" built only from their
events, and where a KV-aware router would send a prompt (``kvviz.fleet.routing``).

Invariants: replicas are independent (garbage or a flood on one never blocks another's thread); each
replica tracks at most ``max_blocks`` hashes and queues at most ``rcvhwm`` messages per socket; a replica
is stale once none of its sockets has been connected for ``stale_after_s`` (vLLM closes its sockets
when the engine exits), and a stale replica is never a router's candidate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from kvviz.fleet.engine_model import ExternalBlockHash, hash_label, match_hash_form
from kvviz.fleet.routing import ReplicaView, Route, route
from kvviz.fleet.subscriber import MAX_DP_SIZE, LiveConfig, Subscriber, check_endpoint, check_listen_endpoint
from kvviz.fleet.wire import offset_endpoint_port
from kvviz.fleet.worker import WorkerRegistry

MAX_REPLICAS = 16
FLEET_MAX_BLOCKS = 100_000  # per replica
FLEET_RCVHWM = 10_000
STALE_AFTER_S = 3.0
CHURN_WINDOW_S = 10
_NAME = re.compile(r"[A-Za-z0-9_.:@/-]{1,64}")
# llm-d's topic convention for a pod's events: kv@<pod>@<model>
_LLMD_TOPIC = re.compile(r"kv@([^@]+)@(.+)")


@dataclass(frozen=True)
class ReplicaSpec:
    """One engine of the fleet: its name, PUB endpoint (``listen``: the address kvviz binds and the
    engine connects to), optional replay endpoint and topic."""

    name: str
    endpoint: str
    replay_endpoint: str | None = None
    topic: str = ""
    listen: bool = False


def _split(spec: str, flag: str) -> tuple[str | None, str]:
    value = (spec or "").strip()
    name, sep, url = value.partition("=")
    if sep and not name.strip().startswith("tcp:"):
        name = name.strip()
        if not _NAME.fullmatch(name):
            raise ValueError(f"{flag} {value[:80]!r}: a replica name is 1-64 letters, digits or _.:@/-")
        return name, url.strip()
    return None, value


def parse_replicas(endpoints: Sequence[str], replays: Sequence[str] = (), dp_size: int = 1,
                   topic: str = "", listen: bool = False) -> tuple[ReplicaSpec, ...]:
    """Replicas from ``NAME=URL`` (or bare ``URL``, named by its position) PUB endpoints and matching
    replay endpoints (``NAME=URL`` by name, bare URLs by position). With ``dp_size`` N each endpoint is N
    data-parallel ranks, rank r on port + r, named ``NAME/dpR`` (vLLM's rule). ``listen``: every
    endpoint is an address to bind (each replica connects to its own). ValueError, one line."""
    if isinstance(dp_size, bool) or not isinstance(dp_size, int) or not 1 <= dp_size <= MAX_DP_SIZE:
        raise ValueError(f"DP size must be in 1..{MAX_DP_SIZE}, got {dp_size!r}")
    if not endpoints:
        raise ValueError("give at least one endpoint")
    named: list[tuple[str, str]] = []
    for i, spec in enumerate(endpoints):
        name, url = _split(spec, "endpoint")
        check = check_listen_endpoint if listen else check_endpoint
        named.append((name or str(i), check(url, f"endpoint {name or i}", dp_size)))
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        raise ValueError(f"replica names must differ: {', '.join(names)}")
    replay_of: dict[str, str] = {}
    for i, spec in enumerate(replays):
        name, url = _split(spec, "replay endpoint")
        key = name if name is not None else (names[i] if i < len(names) else None)
        if key not in names:
            raise ValueError(f"replay endpoint {spec[:80]!r} matches no endpoint (names: {', '.join(names)})")
        replay_of[key] = check_endpoint(url, f"replay endpoint {key}", dp_size)  # type: ignore[index]
    out = []
    for name, url in named:
        for rank in range(dp_size):
            replay = replay_of.get(name)
            out.append(ReplicaSpec(name if dp_size == 1 else f"{name}/dp{rank}", offset_endpoint_port(url, rank),
                                   offset_endpoint_port(replay, rank) if replay else None, topic, listen))
    if len(out) > MAX_REPLICAS:
        raise ValueError(f"{len(out)} replicas is too many (at most {MAX_REPLICAS})")
    return tuple(out)


@dataclass(frozen=True)
class ReplicaHealth:
    """One replica's state: connection, sequence numbers, what replay filled, errors, and what it caches."""

    name: str
    endpoint: str
    status: str  # the subscriber's: receiving / connected / connecting / stopped
    connected: bool
    stale: bool
    last_seq: int | None
    batches: int
    gaps_filled: int
    missed: int
    decode_errors: int
    restarts: int
    blocks_held: int
    distinct_prefixes: int
    churn_per_s: float  # stores + removals per second over the last CHURN_WINDOW_S seconds
    overflow: int
    pod: str | None  # from an llm-d style topic kv@<pod>@<model>
    model: str | None
    # medium -> blocks held there, from the events' medium ("GPU": the device, "CPU": vLLM's host-memory
    # offload tier); a block on both tiers counts once in each, so the sum can exceed blocks_held
    blocks_by_medium: dict[str, int] = field(default_factory=dict)


class Fleet:
    """Subscribers to every replica, started together; read through the methods (each takes the
    replica's lock)."""

    def __init__(self, replicas: Sequence[ReplicaSpec], *, max_blocks: int = FLEET_MAX_BLOCKS,
                 stale_after_s: float = STALE_AFTER_S, rcvhwm: int = FLEET_RCVHWM,
                 max_batches: int | None = None) -> None:
        self.specs = tuple(replicas)
        self.stale_after_s = stale_after_s
        self.subscribers: dict[str, Subscriber] = {}
        try:
            for spec in self.specs:
                cfg = LiveConfig(spec.endpoint, spec.replay_endpoint, spec.topic, listen=spec.listen)
                self.subscribers[spec.name] = Subscriber(cfg, max_blocks=max_blocks, max_batches=max_batches,
                                                         rcvhwm=rcvhwm)
        except ValueError:
            self.stop()
            raise

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.specs]

    def start(self) -> Fleet:
        for sub in self.subscribers.values():
            sub.start()
        return self

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop every replica's subscriber, waiting up to ``timeout_s`` for each (the registry's call)."""
        for sub in self.subscribers.values():
            if sub.alive:
                sub.stop(timeout_s=timeout_s)

    @property
    def alive(self) -> bool:
        return bool(self.subscribers) and all(s.alive for s in self.subscribers.values())

    def wait(self, timeout_s: float) -> bool:
        """Until every replica applied its ``max_batches`` or ``timeout_s`` passed; True if all did."""
        deadline = time.monotonic() + timeout_s
        return all(sub.wait(max(deadline - time.monotonic(), 0.0)) for sub in self.subscribers.values())

    # ------------------------------------------------------------------ reading
    def is_stale(self, name: str, now: float | None = None) -> bool:
        """No socket of the replica connected for ``stale_after_s`` (or never, that long after start)."""
        now = time.time() if now is None else now
        ranks = self.subscribers[name].counters.ranks.values()
        if any(r.connected for r in ranks):
            return False
        return all(now - r.since >= self.stale_after_s for r in ranks)

    def health(self, name: str) -> ReplicaHealth:
        sub = self.subscribers[name]
        summary = sub.summary()
        with sub.lock:
            m = sub.model
            recent = m.samples()[-CHURN_WINDOW_S:]
            churn = sum(x.stored + x.removed for x in recent) / len(recent) if recent else 0.0
            prefixes = len(m.roots())
            media = m.blocks_by_medium()
            topic = sub.last_topic
        match = _LLMD_TOPIC.fullmatch(topic.decode("utf-8", "replace")) if topic else None
        ranks = sub.counters.ranks.values()
        return ReplicaHealth(name, sub.config.endpoint, sub.status(), any(r.connected for r in ranks),
                             self.is_stale(name), summary["last_seq"], summary["batches"], summary["gaps_filled"],
                             summary["missed"], summary["decode_errors"], sub.counters.restarts,
                             summary["cached_blocks"], prefixes, churn, m.overflow,
                             match.group(1) if match else None, match.group(2) if match else None, media)

    def healths(self) -> list[ReplicaHealth]:
        return [self.health(n) for n in self.names]

    def cluster_index(self) -> dict[ExternalBlockHash, dict[str, frozenset[str]]]:
        """Block hash -> {replica: media it holds the block on}, from every replica's events."""
        index: dict[ExternalBlockHash, dict[str, frozenset[str]]] = {}
        for name in self.names:
            sub = self.subscribers[name]
            with sub.lock:
                for h, block in sub.model.blocks.items():
                    index.setdefault(h, {})[name] = frozenset(w[1] for w in block.where)
        return index

    def views(self, digests: Sequence[bytes], loads: dict[str, int] | None = None) -> list[ReplicaView]:
        """Each replica's media for each of the prompt's block digests (in the form it publishes)."""
        out = []
        for name in self.names:
            sub = self.subscribers[name]
            with sub.lock:
                hashes = match_hash_form(digests, sub.model.hash_kind)
                blocks = sub.model.blocks
                held = tuple(frozenset(w[1] for w in blocks[h].where) if h in blocks else frozenset()
                             for h in hashes)
            out.append(ReplicaView(name, held, (loads or {}).get(name, 0), not self.is_stale(name)))
        return out

    def prefix_columns(self, trees: int = 8) -> list[tuple[str, list[tuple[str, int]], int]]:
        """Per replica: its largest prefix trees as (root label, blocks) and the blocks outside them."""
        out = []
        for name in self.names:
            sub = self.subscribers[name]
            with sub.lock:
                top = sub.model.largest_trees(trees)
                held = sub.model.cached_blocks
            shown = [(hash_label(t.root, 8), t.blocks) for t in top]
            out.append((name, shown, max(held - sum(b for _, b in shown), 0)))
        return out

    def block_size(self) -> int | None:
        """The engines' block size, from the first replica whose BlockStored events gave one."""
        for sub in self.subscribers.values():
            with sub.lock:
                if sub.model.block_size:
                    return sub.model.block_size
        return None

    def route(self, digests: Sequence[bytes], prompt_tokens: int, block_size: int,
              loads: dict[str, int] | None = None, turn: int = 0) -> tuple[list[ReplicaView], Route]:
        views = self.views(digests, loads)
        return views, route(views, prompt_tokens, block_size, turn=turn)


MAX_SHARED_FLEETS = 2
_SHARED: WorkerRegistry[tuple[ReplicaSpec, ...], Fleet] = WorkerRegistry(MAX_SHARED_FLEETS, evict=True)


def shared_fleet(replicas: Sequence[ReplicaSpec]) -> Fleet:
    """The process-wide fleet for these replicas (started on first use); at most ``MAX_SHARED_FLEETS``."""
    key = tuple(replicas)
    return _SHARED.get(key, lambda: Fleet(key))  # type: ignore[arg-type, return-value]


def stop_shared_fleet(replicas: Sequence[ReplicaSpec]) -> None:
    fleet = _SHARED.pop(tuple(replicas))
    if fleet is not None:
        fleet.stop()
