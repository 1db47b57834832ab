"""Scenario player: every step runs through one ``KVCacheManager`` and the events are recorded per step.

``play_scenario`` keeps the event log with the index where each step's events end. The state at step
``k`` is ``replay(events[:bounds[k]])``: rebuilt from events, never re-derived (step 0 is the empty
pool, step ``k`` the state after ``k`` steps). ``scenario_state`` is the one function both the page and
``python -m kvviz scenario`` call.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from kvviz.analysis.scenarios.block_trace import StepOutcome, TraceError, run_trace
from kvviz.analysis.scenarios.records import Scenario, ScenarioError, ScenarioStep, from_trace_error
from kvviz.mirror.events import Event, EventKind, PoolCounters, PoolState
from kvviz.mirror.host_pool import RequestHits
from kvviz.mirror.replay import replay


@dataclass(frozen=True)
class BlockTableRow:
    """Logical block ``index`` of a request (tokens ``start+1..end``, 1-based as people count) mapped
    to physical ``block_id``; ``source`` is ``hit`` (reused from the cache), ``host`` (copied back from the
    host tier into a fresh block), ``new`` (allocated for it) or ``skipped`` (outside the sliding window:
    the null block)."""

    index: int
    block_id: int | None
    start: int
    end: int
    source: str
    hash: bytes | None
    ref_cnt: int
    excerpt: str

    @property
    def shown_source(self) -> str:
        """``source`` as the pictures colour it: a ``new`` block without a hash is ``partial`` (its
        tokens do not fill it yet, so it is not cached)."""
        return "partial" if self.source == "new" and self.hash is None else self.source

    @property
    def label(self) -> str:
        """``tokens 1-16 -> block 847``."""
        target = f"block {self.block_id}" if self.block_id is not None else "null block"
        return f"tokens {self.start + 1}-{self.end} -> {target}"

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "tokens": f"{self.start + 1}-{self.end}", "block_id": self.block_id,
                "source": self.source, "hash": self.hash.hex() if self.hash else None, "ref_cnt": self.ref_cnt,
                "cached": self.hash is not None, "label": self.label}


@dataclass(frozen=True)
class RequestView:
    """A running request at one step: its block table, salt, token and hit counts (``host_tokens``: prompt
    tokens copied back from the host tier)."""

    request_id: str
    salt: str | None
    num_tokens: int
    num_prompt_tokens: int
    hit_tokens: int
    rows: tuple[BlockTableRow, ...]
    host_tokens: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "salt": self.salt, "num_tokens": self.num_tokens,
                "num_prompt_tokens": self.num_prompt_tokens, "hit_tokens": self.hit_tokens,
                **({"host_tokens": self.host_tokens} if self.host_tokens else {}),
                "block_table": [r.to_dict() for r in self.rows]}


@dataclass(frozen=True)
class StepView:
    """Everything shown at step ``step`` (0 = before the first step): the step itself and its
    outcome, its events, the pool state replayed from the events, the block tables, the counters,
    and which blocks this step touched (block id -> event kinds)."""

    scenario: Scenario
    step: int
    action: ScenarioStep | None
    error: str | None
    events: tuple[Event, ...]
    state: PoolState
    requests: tuple[RequestView, ...]
    touched: dict[int, tuple[str, ...]]
    counters: dict[str, Any]

    @property
    def num_steps(self) -> int:
        return self.scenario.num_steps

    @property
    def next_eviction(self) -> int | None:
        """The free-queue head: the block the next allocation pops (evicting its hash if cached)."""
        return self.state.free_queue[0] if self.state.free_queue else None

    def to_dict(self) -> dict[str, Any]:
        """The JSON the CLI prints (``python -m kvviz scenario ... --json``)."""
        action = None
        if self.action is not None:
            a = self.action
            action = {"op": a.op, "id": a.id, "salt": a.salt, "num_tokens": len(a.tokens), "note": a.note,
                      "text": a.text}
        return {
            "scenario": self.scenario.name,
            "title": self.scenario.title,
            "block_size": self.scenario.block_size,
            "num_blocks": self.scenario.num_blocks,
            "step": self.step,
            "num_steps": self.num_steps,
            "action": action,
            "error": self.error,
            "block_tables": {r.request_id: r.to_dict() for r in self.requests},
            "pool": [
                {"block_id": b.block_id, "state": b.state, "ref_cnt": b.ref_cnt,
                 "hash": b.hash.hex() if b.hash else None, "touched": list(self.touched.get(b.block_id, ()))}
                for b in self.state.blocks
            ],
            "free_queue": list(self.state.free_queue),
            "next_eviction": self.next_eviction,
            "events": [e.to_dict() for e in self.events],
            "counters": self.counters,
            **({} if self.state.host is None else {"host_tier": {
                "num_blocks": self.state.host.num_blocks,
                "lru": [{"hash": h.hex(), "slot": slot} for h, slot in self.state.host.lru]}}),
        }


@dataclass(frozen=True)
class ScenarioRun:
    """A played scenario: the whole event log, and ``bounds[k]`` = number of events after step k
    (``bounds[0] == 0``). Invariant: ``state_at(k) == replay(events[:bounds[k]])``."""

    scenario: Scenario
    events: tuple[Event, ...]
    bounds: tuple[int, ...]
    outcomes: tuple[StepOutcome, ...]
    final_snapshot: PoolState = field(compare=False)

    @property
    def num_steps(self) -> int:
        return len(self.outcomes)

    def check_step(self, k: int) -> int:
        if isinstance(k, bool) or not isinstance(k, int) or not 0 <= k <= self.num_steps:
            raise ScenarioError(f"step must be an integer in 0..{self.num_steps}, got {k!r}", "bad_step_index",
                                high=self.num_steps, got=repr(k))
        return k

    def events_of_step(self, k: int) -> tuple[Event, ...]:
        """The events step ``k`` (1-based) appended; none for step 0."""
        self.check_step(k)
        return self.events[self.bounds[k - 1]: self.bounds[k]] if k else ()

    def state_at(self, k: int) -> PoolState:
        """The pool after the first ``k`` steps, rebuilt by replaying their events on a fresh pool."""
        self.check_step(k)
        return replay(self.scenario.num_blocks, self.events[: self.bounds[k]], self.scenario.block_size,
                      self.scenario.host_blocks, self.scenario.host_eviction_policy)

    def counters_at(self, k: int) -> dict[str, Any]:
        return counters_of(self.state_at(k))

    def view_at(self, k: int) -> StepView:
        """Everything the page and the CLI show at step ``k``."""
        self.check_step(k)
        state = self.state_at(k)
        events = self.events_of_step(k)
        touched: dict[int, list[str]] = {}
        for e in events:
            ids = e.block_ids
            if e.kind is EventKind.HOST_STORE:  # the offer's held blocks were only touched in the host tier
                ids = tuple(b for b, pos in zip(e.block_ids, e.positions, strict=True)
                            if pos in e.params.get("stored", ()))
            for bid in ids:
                kinds = touched.setdefault(bid, [])
                if e.kind.value not in kinds:
                    kinds.append(e.kind.value)
        action = self.scenario.steps[k - 1] if k else None
        error = self.outcomes[k - 1].error if k else None
        return StepView(self.scenario, k, action, error, events, state, self._request_views(k, state),
                        {b: tuple(v) for b, v in touched.items()}, counters_of(state))

    def _request_views(self, k: int, state: PoolState) -> tuple[RequestView, ...]:
        """Block tables of the requests running after step ``k``. Which logical blocks were cache hits
        and which were allocated comes from the events (touch vs allocate positions)."""
        source: dict[str, dict[int, str]] = {}
        hit_tokens: dict[str, int] = {}
        host_tokens: dict[str, int] = {}
        previous: Event | None = None
        for e in self.events[: self.bounds[k]]:
            rid = e.request_id
            if e.kind is EventKind.HIT:
                source[rid] = {}
                hit_tokens[rid] = e.num_tokens
            elif e.kind is EventKind.MISS and not (previous is not None and previous.kind is EventKind.HIT
                                                   and previous.request_id == rid):
                source[rid] = {}
                hit_tokens[rid] = 0
            if e.kind is EventKind.MISS:
                host_tokens[rid] = 0
            elif e.kind is EventKind.HOST_LOAD:  # after the allocate: these fresh blocks were loaded, not computed
                source.setdefault(rid, {}).update(dict.fromkeys(e.positions, "host"))
                host_tokens[rid] = e.num_tokens
            elif e.kind is EventKind.TOUCH:
                source.setdefault(rid, {}).update(dict.fromkeys(e.positions, "hit"))
            elif e.kind is EventKind.ALLOCATE:
                source.setdefault(rid, {}).update(dict.fromkeys(e.positions, "new"))
            previous = e
        # What each running request holds, from the steps (its text pieces, salt and prompt length).
        pieces: dict[str, list[str]] = {}
        salts: dict[str, str | None] = {}
        prompt_len: dict[str, int] = {}
        for i, step in enumerate(self.scenario.steps[:k]):
            if self.outcomes[i].result is None or not self.outcomes[i].result.ok:  # type: ignore[union-attr]
                continue
            if step.op == "add":
                pieces[step.id] = list(step.pieces) if step.pieces is not None else []
                salts[step.id] = step.salt
                prompt_len[step.id] = len(step.tokens)
            elif step.op == "append":
                pieces.setdefault(step.id, []).extend(step.pieces if step.pieces is not None else [])
        views = []
        for rid, req in state.requests.items():
            rows = []
            text = pieces.get(rid, [])
            for entry in state.block_table(rid):
                bid = entry.block_id
                src = "skipped" if bid is None else source.get(rid, {}).get(entry.index, "new")
                excerpt = "".join(text[entry.start: entry.end]) if len(text) >= entry.end else ""
                rows.append(BlockTableRow(
                    entry.index, bid, entry.start, entry.end, src,
                    state.block_hash[bid] if bid is not None else None,
                    state.ref_cnt[bid] if bid is not None else 0, excerpt,
                ))
            views.append(RequestView(rid, salts.get(rid), req.num_tokens, prompt_len.get(rid, req.num_tokens),
                                     hit_tokens.get(rid, 0), tuple(rows), host_tokens.get(rid, 0)))
        return tuple(views)

    def hits_by_source(self, k: int) -> tuple[RequestHits, ...]:
        """Every prompt admitted in the first ``k`` steps, in order, by source (from the events: a hit's
        tokens, the miss's tokens, a host load's tokens)."""
        self.check_step(k)
        out: list[RequestHits] = []
        device: dict[str, int] = {}
        for e in self.events[: self.bounds[k]]:
            if e.kind is EventKind.HIT:
                device[e.request_id] = e.num_tokens
            elif e.kind is EventKind.MISS:
                hit = device.pop(e.request_id, 0)
                out.append(RequestHits(e.request_id, "", hit + e.num_tokens, hit, 0))
            elif e.kind is EventKind.HOST_LOAD:
                i = max(j for j, r in enumerate(out) if r.request_id == e.request_id)
                out[i] = replace(out[i], host=out[i].host + e.num_tokens)
        return tuple(out)

    def to_dict(self, k: int) -> dict[str, Any]:
        return self.view_at(k).to_dict()


def counters_of(state: PoolState) -> dict[str, Any]:
    """The counters shown at one step, all from the replayed state."""
    c: PoolCounters = state.counters
    blocks = state.blocks
    host = state.host
    tier = {} if host is None else {
        "host_hit_tokens": c.host_hit_tokens, "host_held": len(host.lru), "host_blocks": host.num_blocks,
        "host_stored": host.stored, "host_loaded": host.loaded, "host_dropped": host.evicted,
        "host_skipped": host.skipped,
    }
    return {
        "requests": c.requests,
        "prompt_tokens": c.prompt_tokens,
        "hit_tokens": c.hit_tokens,
        "computed_tokens": c.computed_tokens,
        "hit_rate": c.hit_rate,
        "evictions": c.evictions,
        "refused": c.refused,
        "shared_blocks": state.shared_blocks,
        "used_blocks": sum(1 for b in blocks if b.state == "used"),
        "cached_free_blocks": sum(1 for b in blocks if b.state == "cached"),
        "free_blocks": sum(1 for b in blocks if b.state == "free"),
        "running": len(state.requests),
        **tier,
    }


def play_scenario(scenario: Scenario, sliding_window: int | None | str = "default") -> ScenarioRun:
    """Run every step through a fresh ``KVCacheManager`` and record where each step's events end.
    ScenarioError names an impossible step (e.g. decoding a request that never arrived)."""
    manager = scenario.new_manager(sliding_window)
    try:
        run = run_trace(scenario.trace(), manager)
    except TraceError as exc:
        raise from_trace_error(exc) from None
    bounds = (0, *(o.num_events for o in run.outcomes))
    return ScenarioRun(scenario, tuple(manager.events), bounds, tuple(run.outcomes), manager.snapshot())


def scenario_state(scenario: Scenario, step: int | None = None) -> StepView:
    """The state at ``step`` (default: after the last step), as the page and the CLI show it."""
    run = play_scenario(scenario)
    return run.view_at(run.num_steps if step is None else run.check_step(step))


def block_owner_spans(scenario: Scenario, run: ScenarioRun | None = None) -> dict[bytes, tuple[str, int, int]]:
    """For every full-block hash any request of the scenario produces: the first request that made it
    and its token span ``(request_id, start, end)``, to say in words which tokens an evicted block held."""
    run = run if run is not None else play_scenario(scenario)
    out: dict[bytes, tuple[str, int, int]] = {}
    bs = scenario.block_size
    for e in run.events:
        if e.kind is EventKind.CACHE:
            for pos, h in zip(e.positions, e.block_hashes, strict=True):
                if h is not None and h not in out:
                    out[h] = (e.request_id, pos * bs, (pos + 1) * bs)
    return out


def step_summary(step: ScenarioStep | None) -> str:
    """A short plain description of one step (used by the CLI's human output)."""
    if step is None:
        return "start: empty pool"
    if step.op == "reset":
        return "reset_prefix_cache"
    verb = {"add": "arrives", "append": "decodes", "free": "finishes"}[step.op]
    count = f" ({len(step.tokens)} tokens)" if step.op != "free" else ""
    salt = f" [salt {step.salt}]" if step.salt else ""
    return f"{step.id} {verb}{count}{salt}"
