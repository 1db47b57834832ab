"""Scenario player: requests arrive, decode, finish, and the block pool's events are recorded per step.

A scenario is a request trace (``kvviz.core.trace``: ``add`` = a prompt arrives and is prefilled,
``append`` = decoded tokens, ``free`` = the request finished) plus what a person needs to follow it:
a title, the text and readable token pieces of each step, a note on what to watch, and the shared
system prompt that "add a request" can put in front of a user's own question. Built-in scenarios live
in ``assets/scenarios/*.json`` with token ids from the embedded model's tokenizer stored next to the
text, so they replay identically without loading a model (``tokenize_scenario`` refills them).

``play_scenario`` runs every step through one ``KVCacheManager`` and keeps the event log with the
index where each step's events end. The state at step ``k`` is ``replay(events[:bounds[k]])``:
rebuilt from events, never re-derived (step 0 is the empty pool, step ``k`` the state after ``k``
steps). ``scenario_state`` is the one function both the page and ``python -m kvviz scenario`` call.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kvviz.core.events import Event, EventKind, PoolCounters, PoolState, replay
from kvviz.core.hashing import DEFAULT_HASH, DEFAULT_SEED
from kvviz.core.jsonio import parse_json, read_limited
from kvviz.core.limits import DEFAULT_BLOCK_SIZE
from kvviz.core.manager import KVCacheManager
from kvviz.core.trace import StepOutcome, Trace, TraceError, TraceStep, parse_trace, run_trace

SCENARIO_DIR = Path(__file__).resolve().parents[2] / "assets" / "scenarios"
MAX_SCENARIO_BLOCKS = 256  # a scenario's pool is drawn block by block
MAX_SCENARIO_STEPS = 500
MAX_SCENARIO_BYTES = 4 * 1024 * 1024
MAX_REQUEST_TOKENS = 4096
EXCERPT_CHARS = 40

_TOP_KEYS = {"name", "title", "description", "block_size", "num_blocks", "hash", "seed", "sliding_window",
             "prefix_text", "user_template", "steps"}
_STEP_KEYS = {"op", "id", "tokens", "text", "pieces", "salt", "note"}
USER_PLACEHOLDER = "{text}"

Tokenizer = Callable[[str], tuple[Sequence[int], Sequence[str]]]


class ScenarioError(ValueError):
    """A scenario is malformed or impossible; the message is one line naming the step or key."""


@dataclass(frozen=True)
class ScenarioStep:
    """One step: ``op`` (add / append / free) on request ``id``, or ``reset`` (reset_prefix_cache, no
    id); ``tokens`` are the prompt (add) or the decoded tokens (append); ``pieces`` their readable text
    when known."""

    op: str
    id: str
    tokens: tuple[int, ...] = ()
    salt: str | None = None
    text: str | None = None
    pieces: tuple[str, ...] | None = None
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        if self.op == "reset":
            return {"op": "reset", **({"note": self.note} if self.note is not None else {})}
        out: dict[str, Any] = {"op": self.op, "id": self.id}
        if self.op != "free":
            if self.text is not None:
                out["text"] = self.text
            out["tokens"] = list(self.tokens)
            if self.pieces is not None:
                out["pieces"] = list(self.pieces)
        if self.salt is not None:
            out["salt"] = self.salt
        if self.note is not None:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Scenario:
    """A named request history for a pool of ``num_blocks`` blocks of ``block_size`` tokens."""

    name: str
    title: str
    description: str
    num_blocks: int
    steps: tuple[ScenarioStep, ...]
    block_size: int = DEFAULT_BLOCK_SIZE
    hash: str = DEFAULT_HASH
    seed: str | None = DEFAULT_SEED
    sliding_window: int | None = None
    prefix_text: str | None = None
    user_template: str | None = None

    @property
    def num_steps(self) -> int:
        return len(self.steps)

    @property
    def last_arrival_step(self) -> int:
        """The step (1-based) of the last ``add``, where requests still hold their blocks; the last step
        when nothing arrives."""
        arrivals = [i + 1 for i, s in enumerate(self.steps) if s.op == "add"]
        return arrivals[-1] if arrivals else self.num_steps

    def trace(self) -> Trace:
        """The bare request trace the core replays."""
        return Trace(self.num_blocks, tuple(TraceStep(s.op, s.id, s.tokens, s.salt, s.note) for s in self.steps),
                     self.block_size, self.hash, self.seed, self.sliding_window, self.name, self.description)

    def new_manager(self, sliding_window: int | None | str = "default") -> KVCacheManager:
        window = self.sliding_window if sliding_window == "default" else sliding_window
        return KVCacheManager(self.num_blocks, self.block_size, self.hash, self.seed, window)  # type: ignore[arg-type]

    def with_steps(self, extra: Sequence[ScenarioStep]) -> Scenario:
        """The same scenario with ``extra`` steps appended (validated by ``play_scenario``)."""
        if len(self.steps) + len(extra) > MAX_SCENARIO_STEPS:
            raise ScenarioError(f"a scenario holds at most {MAX_SCENARIO_STEPS} steps")
        return replace(self, steps=self.steps + tuple(extra))

    def compose_prompt(self, user_text: str, with_prefix: bool = True) -> str:
        """The prompt text for a user's own question: the shared prefix and the user template around
        it when ``with_prefix`` (and the scenario has them), else the text as typed."""
        if not with_prefix:
            return user_text
        template = self.user_template or USER_PLACEHOLDER
        return (self.prefix_text or "") + template.replace(USER_PLACEHOLDER, user_text)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form that ``parse_scenario`` reads back unchanged."""
        out: dict[str, Any] = {"name": self.name, "title": self.title, "description": self.description,
                               "block_size": self.block_size, "num_blocks": self.num_blocks, "hash": self.hash,
                               "seed": self.seed}
        if self.sliding_window is not None:
            out["sliding_window"] = self.sliding_window
        if self.prefix_text is not None:
            out["prefix_text"] = self.prefix_text
        if self.user_template is not None:
            out["user_template"] = self.user_template
        out["steps"] = [s.to_dict() for s in self.steps]
        return out


# ----------------------------------------------------------------------------- loading


def _opt_str(obj: dict[str, Any], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        raise ScenarioError(f"{where}'{key}' must be a string, got {type(value).__name__}")
    return value


def parse_scenario(obj: Any, name: str = "custom", tokenizer: Tokenizer | None = None) -> Scenario:
    """Validate a decoded scenario (or a plain ``kvviz simulate`` trace). A step with ``text`` but no
    ``tokens`` is tokenized with ``tokenizer``; ScenarioError (one line) for anything malformed."""
    if not isinstance(obj, dict):
        raise ScenarioError(f"a scenario is a JSON object, got {type(obj).__name__}")
    unknown = sorted(set(obj) - _TOP_KEYS)
    if unknown:
        raise ScenarioError(f"unknown scenario key(s): {', '.join(unknown)}; valid: {', '.join(sorted(_TOP_KEYS))}")
    raw_steps = obj.get("steps")
    if not isinstance(raw_steps, list):
        raise ScenarioError("'steps' must be a list of steps" if "steps" in obj else "missing 'steps'")
    if len(raw_steps) > MAX_SCENARIO_STEPS:
        raise ScenarioError(f"too many steps: {len(raw_steps)} (at most {MAX_SCENARIO_STEPS})")
    nb = obj.get("num_blocks")
    if isinstance(nb, int) and not isinstance(nb, bool) and nb > MAX_SCENARIO_BLOCKS:
        raise ScenarioError(f"num_blocks must be at most {MAX_SCENARIO_BLOCKS} for a scenario (the pool is "
                            f"drawn block by block), got {nb}")
    texts: list[str | None] = []
    pieces: list[tuple[str, ...] | None] = []
    trace_steps: list[dict[str, Any]] = []
    for i, raw in enumerate(raw_steps):
        where = f"step {i + 1}: "
        if not isinstance(raw, dict):
            raise ScenarioError(f"{where}a step is a JSON object, got {type(raw).__name__}")
        bad = sorted(set(raw) - _STEP_KEYS)
        if bad:
            raise ScenarioError(f"{where}unknown key(s): {', '.join(bad)}")
        text = _opt_str(raw, "text", where)
        step = {k: v for k, v in raw.items() if k not in ("text", "pieces")}
        step_pieces = raw.get("pieces")
        if raw.get("op") in ("add", "append") and "tokens" not in raw and text is not None:
            if tokenizer is None:
                raise ScenarioError(f"{where}has 'text' but no 'tokens'; tokenize the scenario first")
            if not text:
                raise ScenarioError(f"{where}'text' is empty")
            ids, step_pieces = tokenizer(text)
            step["tokens"] = list(ids)
        if step_pieces is not None:
            if not isinstance(step_pieces, (list, tuple)) or not all(isinstance(p, str) for p in step_pieces):
                raise ScenarioError(f"{where}'pieces' must be a list of strings")
            if not isinstance(step.get("tokens"), list) or len(step_pieces) != len(step["tokens"]):
                raise ScenarioError(f"{where}'pieces' must have one entry per token")
            step_pieces = tuple(step_pieces)
        if isinstance(step.get("tokens"), list) and len(step["tokens"]) > MAX_REQUEST_TOKENS:
            raise ScenarioError(f"{where}{len(step['tokens']):,} tokens is too many for one step "
                                f"(at most {MAX_REQUEST_TOKENS:,})")
        texts.append(text)
        pieces.append(step_pieces)
        trace_steps.append(step)
    trace_obj = {k: obj[k] for k in ("block_size", "num_blocks", "hash", "seed", "sliding_window") if k in obj}
    trace_obj["steps"] = trace_steps
    try:
        trace = parse_trace(trace_obj)
    except TraceError as exc:
        raise ScenarioError(_renumber(str(exc))) from None
    where = ""
    title = _opt_str(obj, "title", where) or obj.get("name") or name
    description = _opt_str(obj, "description", where) or ""
    prefix_text = _opt_str(obj, "prefix_text", where)
    user_template = _opt_str(obj, "user_template", where)
    if user_template is not None and USER_PLACEHOLDER not in user_template:
        raise ScenarioError(f"'user_template' must contain {USER_PLACEHOLDER}")
    steps = tuple(
        ScenarioStep(s.op, s.id, s.tokens, s.salt, texts[i], pieces[i], s.note)
        for i, s in enumerate(trace.steps)
    )
    scenario = Scenario(
        name=str(_opt_str(obj, "name", where) or name), title=str(title), description=description,
        num_blocks=trace.num_blocks, steps=steps, block_size=trace.block_size, hash=trace.hash,
        seed=trace.seed, sliding_window=trace.sliding_window, prefix_text=prefix_text,
        user_template=user_template,
    )
    return scenario


def _renumber(message: str) -> str:
    """Trace errors count steps from 0; scenarios count them from 1 like the player does."""
    if message.startswith("step "):
        head, _, rest = message.partition(":")
        number = head.split()[1]
        if number.isdigit():
            return f"step {int(number) + 1}{head[len('step ') + len(number):]}:{rest}"
    return message


def load_scenario(path: str | Path, tokenizer: Tokenizer | None = None) -> Scenario:
    """Read and validate a scenario file; ScenarioError (one line) for unreadable or malformed files."""
    raw = read_limited(path, MAX_SCENARIO_BYTES, "scenario file", ScenarioError)
    return parse_scenario_text(raw, Path(path).stem, tokenizer, where=str(path))


def parse_scenario_text(raw: bytes | str, name: str = "custom", tokenizer: Tokenizer | None = None,
                        where: str = "the scenario") -> Scenario:
    """Decode and validate scenario JSON given as bytes or text (an uploaded file, stdin)."""
    return parse_scenario(parse_json(raw, where, ScenarioError), name, tokenizer)


BUILTIN_ORDER = ("shared_prompt", "tenant_salts", "pool_pressure", "branching_prompts")


def builtin_names() -> list[str]:
    """Names of the built-in scenarios (file stems in assets/scenarios), in display order."""
    names = {p.stem for p in SCENARIO_DIR.glob("*.json")}
    return [n for n in BUILTIN_ORDER if n in names] + sorted(names - set(BUILTIN_ORDER))


def load_builtin(name: str) -> Scenario:
    """A built-in scenario by name; ScenarioError listing the valid names otherwise."""
    if name not in builtin_names():
        raise ScenarioError(f"unknown scenario {name!r}; built-in: {', '.join(builtin_names())}")
    return load_scenario(SCENARIO_DIR / f"{name}.json")


def tokenize_scenario(obj: dict[str, Any], tokenizer: Tokenizer) -> dict[str, Any]:
    """A copy of a scenario object whose text steps get fresh ``tokens`` and ``pieces`` from
    ``tokenizer`` (how the built-in files were made; a test checks they still match)."""
    out = dict(obj)
    steps = []
    for raw in obj.get("steps", []):
        step = dict(raw)
        if step.get("op") in ("add", "append") and isinstance(step.get("text"), str):
            ids, pieces = tokenizer(step["text"])
            step["tokens"] = list(ids)
            step["pieces"] = list(pieces)
        steps.append(step)
    out["steps"] = steps
    return out


def running_ids(scenario: Scenario) -> set[str]:
    """Request ids still running after the last step (added, not freed)."""
    running: set[str] = set()
    for s in scenario.steps:
        if s.op == "add":
            running.add(s.id)
        elif s.op == "free":
            running.discard(s.id)
    return running


def next_request_id(scenario: Scenario, prefix: str = "you") -> str:
    """A request id not used by any step of the scenario: ``you1``, ``you2``, ..."""
    used = {s.id for s in scenario.steps}
    n = 1
    while f"{prefix}{n}" in used:
        n += 1
    return f"{prefix}{n}"


def user_request_steps(
    request_id: str,
    tokens: Sequence[int],
    pieces: Sequence[str] | None = None,
    *,
    text: str | None = None,
    salt: str | None = None,
    answer_tokens: Sequence[int] = (),
    answer_pieces: Sequence[str] | None = None,
    answer_text: str | None = None,
    finish: bool = False,
    note: str | None = None,
) -> list[ScenarioStep]:
    """The steps of one user request: it arrives, optionally decodes an answer, optionally finishes."""
    if not tokens:
        raise ScenarioError("the request has no tokens")
    if len(tokens) > MAX_REQUEST_TOKENS:
        raise ScenarioError(f"the request has more than {MAX_REQUEST_TOKENS:,} tokens, the most one step takes")
    steps = [ScenarioStep("add", request_id, tuple(tokens), salt or None, text,
                          tuple(pieces) if pieces is not None else None, note)]
    if answer_tokens:
        steps.append(ScenarioStep("append", request_id, tuple(answer_tokens), None, answer_text,
                                  tuple(answer_pieces) if answer_pieces is not None else None))
    if finish:
        steps.append(ScenarioStep("free", request_id))
    return steps


# ----------------------------------------------------------------------------- playing


@dataclass(frozen=True)
class BlockTableRow:
    """Logical block ``index`` of a request (tokens ``start+1..end``, 1-based as people count) mapped
    to physical ``block_id``; ``source`` is ``hit`` (reused from the cache), ``new`` (allocated for
    it) or ``skipped`` (outside the sliding window: the null block)."""

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
    """A running request at one step: its block table, salt, token and hit counts."""

    request_id: str
    salt: str | None
    num_tokens: int
    num_prompt_tokens: int
    hit_tokens: int
    rows: tuple[BlockTableRow, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"request_id": self.request_id, "salt": self.salt, "num_tokens": self.num_tokens,
                "num_prompt_tokens": self.num_prompt_tokens, "hit_tokens": self.hit_tokens,
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
            raise ScenarioError(f"step must be an integer in 0..{self.num_steps}, got {k!r}")
        return k

    def events_of_step(self, k: int) -> tuple[Event, ...]:
        """The events step ``k`` (1-based) appended; none for step 0."""
        self.check_step(k)
        return self.events[self.bounds[k - 1]: self.bounds[k]] if k else ()

    def state_at(self, k: int) -> PoolState:
        """The pool after the first ``k`` steps, rebuilt by replaying their events on a fresh pool."""
        self.check_step(k)
        return replay(self.scenario.num_blocks, self.events[: self.bounds[k]], self.scenario.block_size)

    def counters_at(self, k: int) -> dict[str, Any]:
        return counters_of(self.state_at(k))

    def view_at(self, k: int) -> StepView:
        """Everything the page and the CLI show at step ``k``."""
        self.check_step(k)
        state = self.state_at(k)
        events = self.events_of_step(k)
        touched: dict[int, list[str]] = {}
        for e in events:
            for bid in e.block_ids:
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
                                     hit_tokens.get(rid, 0), tuple(rows)))
        return tuple(views)

    def to_dict(self, k: int) -> dict[str, Any]:
        return self.view_at(k).to_dict()


def counters_of(state: PoolState) -> dict[str, Any]:
    """The counters shown at one step, all from the replayed state."""
    c: PoolCounters = state.counters
    blocks = state.blocks
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
    }


def play_scenario(scenario: Scenario, sliding_window: int | None | str = "default") -> ScenarioRun:
    """Run every step through a fresh ``KVCacheManager`` and record where each step's events end.
    ScenarioError names an impossible step (e.g. decoding a request that never arrived)."""
    manager = scenario.new_manager(sliding_window)
    try:
        run = run_trace(scenario.trace(), manager)
    except TraceError as exc:
        raise ScenarioError(_renumber(str(exc))) from None
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


__all__ = [
    "BlockTableRow", "RequestView", "Scenario", "ScenarioError", "ScenarioRun", "ScenarioStep", "StepView",
    "block_owner_spans", "builtin_names", "counters_of", "load_builtin", "load_scenario", "next_request_id",
    "parse_scenario", "parse_scenario_text", "play_scenario", "running_ids", "scenario_state",
    "step_summary", "tokenize_scenario", "user_request_steps",
]
