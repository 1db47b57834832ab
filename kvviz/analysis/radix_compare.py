"""One request history, three prefix caches: SGLang's radix tree, vLLM's block pool (hash chain) and
vLLM's sliding-window hit search.

Each engine gets the same scenario steps and the same memory, ``(num_blocks - 1) * block_size``
token slots (the pool's block 0 is vLLM's null block, which holds no tokens):

- **radix**: a ``RadixCache`` (token granularity by default). A request matches its longest cached
  prefix, locks it, and the rest of its prompt is inserted as a new leaf (locked while it runs);
  decoded tokens occupy private slots and join the tree when the request finishes, as SGLang's
  ``cache_finished_req`` does. When slots run out, unlocked leaves are evicted, least recently used
  first. The cache salt is the radix ``extra_key``, so tenants never share nodes.
  The engine itself is ``kvviz.mirror.radix_engine``.
- **pool**: the scenario player (``KVCacheManager``, full attention): whole blocks only, LRU free queue.
- **window**: the same manager with ``sliding_window`` set: its hit search needs only the last
  ``cdiv(window - 1, block_size)`` blocks before the recomputed token, and blocks outside the window are
  null.

Reuse is capped at ``num_tokens - 1`` for every engine (each recomputes the last prompt token to get
logits). Per request the comparison reports each engine's reused tokens, the **partial tail** (tokens
the radix tree reuses past the last full block, which a block cache cannot), and what each engine
evicted to make room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvviz.analysis.scenarios.play import ScenarioRun, play_scenario
from kvviz.analysis.scenarios.records import Scenario, ScenarioError
from kvviz.mirror.events import EventKind, PoolState, usable_blocks
from kvviz.mirror.hashing import get_hash_fn, hash_block_chain, init_none_hash
from kvviz.mirror.radix_engine import EvictedRun, RadixEngine, RadixState

DEFAULT_WINDOW = 32
ENGINES = ("radix", "pool", "window")


# ----------------------------------------------------------------------------- the comparison


@dataclass(frozen=True)
class RequestReuse:
    """One arriving request in the three engines. ``*_tokens`` are reused prompt tokens (None when
    that engine refused it). ``partial_tail_tokens`` = radix reuse past its last full block: what a
    block cache cannot reuse even when it holds the same prefix. ``window_block_ids`` is the window
    engine's hit (None = null block, skipped)."""

    step: int
    request_id: str
    salt: str | None
    num_tokens: int
    history_prefix_tokens: int
    radix_tokens: int | None
    pool_tokens: int | None
    window_tokens: int | None
    window_block_ids: tuple[int | None, ...]
    partial_tail_tokens: int
    block_size: int

    @property
    def aligned_radix_tokens(self) -> int:
        """The radix reuse rounded down to whole blocks: what the pool reuses when it holds the same."""
        return (self.radix_tokens or 0) - self.partial_tail_tokens

    @property
    def window_kept_blocks(self) -> int:
        """Blocks of the window engine's hit that hold K/V (the rest are null blocks, skipped)."""
        return sum(1 for b in self.window_block_ids if b is not None)

    @property
    def eviction_gap_tokens(self) -> int:
        """Block-aligned radix reuse minus pool reuse: > 0 when the pool evicted what the tree kept,
        < 0 when the tree evicted what the pool kept."""
        return self.aligned_radix_tokens - (self.pool_tokens or 0)

    def to_dict(self) -> dict[str, Any]:
        return {
            "step": self.step, "request_id": self.request_id, "salt": self.salt, "num_tokens": self.num_tokens,
            "history_prefix_tokens": self.history_prefix_tokens, "radix_tokens": self.radix_tokens,
            "pool_tokens": self.pool_tokens, "window_tokens": self.window_tokens,
            "window_block_ids": list(self.window_block_ids), "partial_tail_tokens": self.partial_tail_tokens,
            "eviction_gap_tokens": self.eviction_gap_tokens,
        }


@dataclass(frozen=True)
class ChainNode:
    """One physical block drawn in the hash chain: ``parent`` is the hash of the block before it in
    its chain (None for block 0); ``hash`` None for a partial block, never cached. ``queue_pos`` is its
    place in the free queue (0 = next eviction), None while in use."""

    block_id: int
    hash: bytes | None
    parent: bytes | None
    index: int
    start: int
    end: int
    ref_cnt: int
    queue_pos: int | None
    request_id: str | None
    salt: str | None


@dataclass(frozen=True)
class RadixComparison:
    """The three engines over one scenario. ``radix_states[k]`` is the tree after step k (0 = empty);
    ``pool_run``/``window_run`` replay their event logs; ``evictions[k]`` lists what each engine
    evicted in step k; ``radix_errors[k]`` the radix refusal of step k (None when fine)."""

    scenario: Scenario
    window: int
    radix_page_size: int
    pool_run: ScenarioRun
    window_run: ScenarioRun
    radix_states: tuple[RadixState, ...]
    radix_errors: tuple[str | None, ...]
    requests: tuple[RequestReuse, ...]
    evictions: tuple[tuple[EvictedRun, ...], ...]
    chain_meta: dict[bytes, tuple[bytes | None, int, str, str | None]]
    sequences: tuple[tuple[tuple[int, ...], tuple[str, ...]], ...] = ()

    def text_of(self, start: int, tokens: tuple[int, ...], num_tokens: int) -> str:
        """The text of the token run ``[start, start + num_tokens)`` whose first tokens are ``tokens``,
        from any request of the scenario that holds it ('' when no step carried text pieces)."""
        for ids, pieces in self.sequences:
            end = start + num_tokens
            if len(ids) >= end and ids[start: start + len(tokens)] == tokens and len(pieces) >= end:
                return "".join(pieces[start:end])
        return ""

    @property
    def num_steps(self) -> int:
        return self.scenario.num_steps

    @property
    def capacity_tokens(self) -> int:
        return usable_blocks(self.scenario.num_blocks) * self.scenario.block_size

    def check_step(self, k: int) -> int:
        return self.pool_run.check_step(k)

    def requests_until(self, k: int) -> tuple[RequestReuse, ...]:
        return tuple(r for r in self.requests if r.step <= k)

    def reuse_totals(self, k: int) -> dict[str, int]:
        """Prompt tokens reused by the requests that arrived up to step ``k``, per engine (``radix``,
        ``pool``, ``window``; a refused request counts 0) and ``tail``: the radix reuse inside partial
        blocks, which no block cache can reuse."""
        requests = self.requests_until(k)
        return {
            "radix": sum(r.radix_tokens or 0 for r in requests),
            "pool": sum(r.pool_tokens or 0 for r in requests),
            "window": sum(r.window_tokens or 0 for r in requests),
            "tail": sum(r.partial_tail_tokens for r in requests),
        }

    def chain_at(self, k: int, run: ScenarioRun | None = None) -> tuple[ChainNode, ...]:
        """Every block of the pool holding a hash or used by a running request after step k, with its
        chain parent, for drawing the hash chain next to the tree."""
        run = run if run is not None else self.pool_run
        state: PoolState = run.state_at(k)
        queue_pos = {bid: i for i, bid in enumerate(state.free_queue)}
        owner: dict[int, tuple[str, int]] = {}
        for rid, req in state.requests.items():
            for i, bid in enumerate(req.block_ids):
                if bid is not None:
                    owner.setdefault(bid, (rid, i))
        bs = self.scenario.block_size
        salts = _salts_until(self.scenario, k)
        out: list[ChainNode] = []
        for b in state.blocks:
            if b.hash is not None:
                parent, index, rid, salt = self.chain_meta.get(b.hash, (None, 0, "", None))
                out.append(ChainNode(b.block_id, b.hash, parent, index, index * bs, (index + 1) * bs, b.ref_cnt,
                                     queue_pos.get(b.block_id), rid or None, salt))
            elif b.block_id in owner:
                rid, index = owner[b.block_id]
                table = state.requests[rid].block_ids
                prev = table[index - 1] if index > 0 else None
                parent = state.block_hash[prev] if prev is not None else None
                end = min((index + 1) * bs, state.requests[rid].num_tokens)
                out.append(ChainNode(b.block_id, None, parent, index, index * bs, end, b.ref_cnt, None, rid,
                                     salts.get(rid)))
        return tuple(out)

    def to_dict(self, k: int | None = None) -> dict[str, Any]:
        """JSON for ``python -m kvviz scenario --radix``: per-request reuse, evictions, and the tree,
        pool and window state at step ``k`` (default: the last step)."""
        k = self.num_steps if k is None else self.check_step(k)
        pool = self.pool_run.state_at(k)
        window = self.window_run.state_at(k)
        return {
            "scenario": self.scenario.name,
            "step": k,
            "num_steps": self.num_steps,
            "block_size": self.scenario.block_size,
            "capacity_tokens": self.capacity_tokens,
            "sliding_window": self.window,
            "radix_page_size": self.radix_page_size,
            "requests": [r.to_dict() for r in self.requests_until(k)],
            "evictions": [{"step": i, **e.to_dict()} for i in range(1, k + 1) for e in self.evictions[i]],
            "radix": self.radix_states[k].to_dict(),
            "pool": {"cached_block_ids": pool.cached_block_ids, "free_queue": list(pool.free_queue),
                     "evictions": pool.counters.evictions, "hit_tokens": pool.counters.hit_tokens},
            "window": {"cached_block_ids": window.cached_block_ids, "free_queue": list(window.free_queue),
                       "evictions": window.counters.evictions, "hit_tokens": window.counters.hit_tokens},
        }


def _salts_until(scenario: Scenario, k: int) -> dict[str, str | None]:
    salts: dict[str, str | None] = {}
    for s in scenario.steps[:k]:
        if s.op == "add":
            salts[s.id] = s.salt
    return salts


def _chain_meta(scenario: Scenario) -> dict[bytes, tuple[bytes | None, int, str, str | None]]:
    """hash -> (parent hash, block index, first request producing it, salt) for every full block of every
    sequence in the scenario (prompts plus decoded tokens), from the chained hash function itself."""
    fn = get_hash_fn(scenario.hash)
    none_hash = init_none_hash(fn, scenario.seed)
    seqs: dict[str, list[int]] = {}
    salts: dict[str, str | None] = {}
    meta: dict[bytes, tuple[bytes | None, int, str, str | None]] = {}

    def index(rid: str) -> None:
        hashes = hash_block_chain(seqs[rid], scenario.block_size, fn, none_hash, salts[rid])
        for i, h in enumerate(hashes):
            meta.setdefault(h, (hashes[i - 1] if i else None, i, rid, salts[rid]))

    for s in scenario.steps:
        if s.op == "add":
            seqs[s.id] = list(s.tokens)
            salts[s.id] = s.salt
            index(s.id)
        elif s.op == "append" and s.id in seqs:
            seqs[s.id].extend(s.tokens)
            index(s.id)
    return meta


def _pool_evictions(run: ScenarioRun, k: int, engine: str,
                    meta: dict[bytes, tuple[bytes | None, int, str, str | None]], bs: int) -> list[EvictedRun]:
    out = []
    for e in run.events_of_step(k):
        if e.kind is EventKind.EVICT:
            for bid, h in zip(e.block_ids, e.block_hashes, strict=True):
                _, index, rid, _ = meta.get(h, (None, 0, "", None)) if h is not None else (None, 0, "", None)
                out.append(EvictedRun(engine, bid, index * bs, (index + 1) * bs, rid or None))
    return out


def _history_prefix(history: list[tuple[str | None, list[int]]], tokens: list[int], salt: str | None) -> int:
    best = 0
    for other_salt, seq in history:
        if other_salt != salt:
            continue
        n = min(len(seq), len(tokens))
        i = 0
        while i < n and seq[i] == tokens[i]:
            i += 1
        best = max(best, i)
    return min(best, len(tokens) - 1)


def compare_radix_pool(scenario: Scenario, sliding_window: int = DEFAULT_WINDOW,
                       radix_page_size: int = 1) -> RadixComparison:
    """Feed ``scenario`` to the radix tree, the block pool and the sliding-window manager."""
    if isinstance(sliding_window, bool) or not isinstance(sliding_window, int) or not 2 <= sliding_window <= 1 << 20:
        raise ScenarioError(f"sliding window must be an integer in 2..{1 << 20} tokens, got {sliding_window!r}",
                            "bad_window", high=1 << 20, got=repr(sliding_window))
    if isinstance(radix_page_size, bool) or not isinstance(radix_page_size, int) or not 1 <= radix_page_size <= 256:
        raise ScenarioError(f"radix page size must be an integer in 1..256, got {radix_page_size!r}",
                            "bad_page_size", got=repr(radix_page_size))
    pool_run = play_scenario(scenario, sliding_window=None)
    window_run = play_scenario(scenario, sliding_window=sliding_window)
    meta = _chain_meta(scenario)
    bs = scenario.block_size
    engine = RadixEngine(usable_blocks(scenario.num_blocks) * bs, radix_page_size)
    states = [engine.state()]
    errors: list[str | None] = [None]
    evictions: list[tuple[EvictedRun, ...]] = [()]
    requests: list[RequestReuse] = []
    history: list[tuple[str | None, list[int]]] = []
    live: dict[str, list[int]] = {}
    refused: set[str] = set()
    for k, step in enumerate(scenario.steps, start=1):
        step_evictions: list[EvictedRun] = []
        error = None
        if step.op == "add":
            tokens = list(step.tokens)
            reused, ev, error = engine.add(step.id, tokens, step.salt)
            step_evictions += ev
            if reused is None:
                refused.add(step.id)
            else:
                refused.discard(step.id)
            pool_out = pool_run.outcomes[k - 1]
            win_out = window_run.outcomes[k - 1]
            pool_ok = pool_out.result is not None and pool_out.result.ok
            win_ok = win_out.result is not None and win_out.result.ok
            win_ids: tuple[int | None, ...] = ()
            if win_ok:
                win_ids = tuple(window_run.state_at(k).requests[step.id].block_ids[: win_out.num_computed_tokens // bs])
            radix_tokens = reused
            tail = (radix_tokens % bs) if radix_tokens is not None else 0
            requests.append(RequestReuse(
                step=k, request_id=step.id, salt=step.salt, num_tokens=len(tokens),
                history_prefix_tokens=_history_prefix(history + [(s, q) for s, q in _live(live, scenario, k)],
                                                      tokens, step.salt),
                radix_tokens=radix_tokens,
                pool_tokens=pool_out.num_computed_tokens if pool_ok else None,
                window_tokens=win_out.num_computed_tokens if win_ok else None,
                window_block_ids=win_ids, partial_tail_tokens=tail, block_size=bs,
            ))
            if reused is not None:
                live[step.id] = tokens
        elif step.id in refused:
            error = f"request {step.id!r} was refused, so there is nothing to {step.op}"
            if step.op == "free":
                refused.discard(step.id)
        elif step.op == "append":
            ok, ev, error = engine.append(step.id, list(step.tokens))
            step_evictions += ev
            if step.id in live:
                live[step.id] = live[step.id] + list(step.tokens)
        else:
            engine.free(step.id)
            if step.id in live:
                history.append((_salt_of(scenario, k, step.id), live.pop(step.id)))
        step_evictions += _pool_evictions(pool_run, k, "pool", meta, bs)
        step_evictions += _pool_evictions(window_run, k, "window", meta, bs)
        states.append(engine.state())
        errors.append(error)
        evictions.append(tuple(step_evictions))
    return RadixComparison(scenario, sliding_window, radix_page_size, pool_run, window_run, tuple(states),
                           tuple(errors), tuple(requests), tuple(evictions), meta, _sequences(scenario))


def _sequences(scenario: Scenario) -> tuple[tuple[tuple[int, ...], tuple[str, ...]], ...]:
    """Every request's final token sequence with its pieces, for the steps that carry pieces."""
    seqs: list[tuple[list[int], list[str]]] = []
    current: dict[str, int] = {}
    for s in scenario.steps:
        if s.op == "add" and s.pieces is not None:
            current[s.id] = len(seqs)
            seqs.append((list(s.tokens), list(s.pieces)))
        elif s.op == "add":
            current.pop(s.id, None)
        elif s.op == "append" and s.id in current:
            ids, pieces = seqs[current[s.id]]
            if s.pieces is None:
                current.pop(s.id)
                continue
            ids.extend(s.tokens)
            pieces.extend(s.pieces)
    return tuple((tuple(i), tuple(p)) for i, p in seqs)


def _salt_of(scenario: Scenario, k: int, rid: str) -> str | None:
    return _salts_until(scenario, k).get(rid)


def _live(live: dict[str, list[int]], scenario: Scenario, k: int) -> list[tuple[str | None, list[int]]]:
    salts = _salts_until(scenario, k - 1)
    return [(salts.get(rid), seq) for rid, seq in live.items()]
