"""Request traces for the block manager: load and validate a JSON trace, replay it step by step.

A trace is ``{"block_size": 16, "num_blocks": 8, "hash": "sha256", "seed": null,
"sliding_window": null, "host_blocks": null, "steps": [{"op": "add"|"append"|"free", "id": "r1", "tokens": [...],
"salt": "..."}, {"op": "reset"}]}``. ``add`` = a prompt just prefilled, ``append`` = decoded tokens,
``free`` = the request finished, ``reset`` = ``reset_prefix_cache``. Only ``num_blocks`` (block 0 is the
null block, so at least 2) and ``steps`` are required; ``seed`` null = vLLM's default seed resolution;
``host_blocks`` puts a host tier of that many blocks under the pool (vLLM's CPU offloading; null = none).
A refused step is reported in its step (``error``: a reason code, ``error_params``); later steps on a
refused id are reported as skipped (code ``skipped_refused``), not failed. Each step also reports
vLLM's KV-cache events and prefix-cache counters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kvviz.errors import CodedError, json_kind
from kvviz.mirror import limits
from kvviz.mirror.events import PoolCounters
from kvviz.mirror.hashing import (
    DEFAULT_HASH,
    DEFAULT_SEED,
    HASH_FUNCTIONS,
    get_hash_fn,
    validate_token_ids,
)
from kvviz.mirror.kv_events import event_to_dict
from kvviz.mirror.limits import DEFAULT_BLOCK_SIZE
from kvviz.mirror.manager import MAX_NUM_BLOCKS, AddResult, KVCacheManager
from kvviz.util.jsonio import parse_json, read_limited

MAX_TRACE_BYTES = 16 * 1024 * 1024
MAX_TRACE_STEPS = 10_000
MAX_TRACE_TOKENS = 1_000_000
OPS = ("add", "append", "free", "reset")
_TOP_KEYS = {"block_size", "num_blocks", "hash", "seed", "sliding_window", "steps", "name", "description",
             "host_blocks"}
_STEP_KEYS = {"add": {"op", "id", "tokens", "salt", "note"}, "append": {"op", "id", "tokens", "note"},
              "free": {"op", "id", "note"}, "reset": {"op", "note"}}


class TraceError(CodedError):
    """The trace is malformed or impossible: one English line naming the step or key, a code from
    ``TRACE_ERROR_CODES`` (or a JSON-reading ``json_*`` code) and its params; ``step`` counts from 0."""


TRACE_ERROR_CODES: tuple[str, ...] = (
    "not_int", "out_of_range", "not_object", "unknown_keys", "missing_key", "bad_block_size", "unknown_hash",
    "bad_seed", "not_string", "steps_not_list", "too_many_steps", "too_many_tokens", "step_not_object",
    "bad_op", "step_unknown_keys", "bad_id", "needs_tokens", "tokens_not_list", "token_not_int",
    "token_out_of_range", "no_tokens", "request_running", "unknown_request", "bad_request_id", "step_failed",
)
"""Every ``TraceError.code`` besides the JSON reader's; the words are kvviz_app.block_table.text's ``TRACE_ERRORS``."""


@dataclass(frozen=True)
class TraceStep:
    op: str
    id: str
    tokens: tuple[int, ...] = ()
    salt: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class Trace:
    num_blocks: int
    steps: tuple[TraceStep, ...]
    block_size: int = DEFAULT_BLOCK_SIZE
    hash: str = DEFAULT_HASH
    seed: str | None = DEFAULT_SEED
    sliding_window: int | None = None
    name: str | None = None
    description: str | None = None
    host_blocks: int | None = None

    def new_manager(self) -> KVCacheManager:
        return KVCacheManager(self.num_blocks, self.block_size, self.hash, self.seed, self.sliding_window,
                              self.host_blocks)


@dataclass(frozen=True)
class StepOutcome:
    """One replayed step: the manager's result (None when skipped) and the reported fields."""

    step: TraceStep
    num_computed_tokens: int
    hit_blocks: tuple[int, ...]
    new_blocks: tuple[int, ...]
    evicted_blocks: tuple[int, ...]
    error: str | None  # reason code: refuse, reset_refused, skipped_refused
    result: AddResult | None
    num_events: int  # length of the event log after this step
    error_params: dict[str, Any] = field(default_factory=dict)
    counters: PoolCounters = field(default_factory=PoolCounters)

    def to_dict(self) -> dict[str, Any]:
        events = self.result.events if self.result is not None else ()
        c = self.counters
        return {
            "op": self.step.op,
            "id": self.step.id,
            "num_computed_tokens": self.num_computed_tokens,
            "hit_blocks": list(self.hit_blocks),
            "new_blocks": list(self.new_blocks),
            "evicted_blocks": list(self.evicted_blocks),
            "error": self.error,
            "error_params": dict(self.error_params),
            "events": [e.to_dict() for e in events],
            "kv_events": [event_to_dict(k) for e in events for k in e.kv_events],
            "prefix_cache": {"requests": c.requests, "queries": c.queries, "hits": c.hits},
        }


@dataclass
class TraceRun:
    trace: Trace
    manager: KVCacheManager
    outcomes: list[StepOutcome]

    def final(self) -> dict[str, Any]:
        state = self.manager.snapshot()
        return {
            "free_queue": list(state.free_queue),
            "cached_block_ids": state.cached_block_ids,
            "ref_cnt": list(state.ref_cnt),
            "usage": self.manager.block_pool.get_usage(),
        }

    def to_dict(self) -> dict[str, Any]:
        m = self.manager
        seed = None if m.seed_reason == "random_non_crypto" else m.seed_in_force  # a random seed stays secret
        return {"hash": m.hash_name, "none_hash_seed": seed, "none_hash_seed_reason": m.seed_reason,
                "null_block": 0, "steps": [o.to_dict() for o in self.outcomes], "final": self.final()}


def _int(value: Any, what: str, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TraceError(f"{what} must be an integer, got {value!r}", "not_int", key=what, got=repr(value)[:40])
    if not lo <= value <= hi:
        raise TraceError(f"{what} must be in {lo}..{hi}, got {value}", "out_of_range", key=what, low=lo, high=hi,
                         got=value)
    return value


def parse_trace(obj: Any) -> Trace:
    """Validate a decoded JSON trace; TraceError with a one-line message otherwise."""
    if not isinstance(obj, dict):
        raise TraceError(f"a trace is a JSON object, got {type(obj).__name__}", "not_object", kind=json_kind(obj))
    unknown = sorted(set(obj) - _TOP_KEYS)
    if unknown:
        keys, valid = ", ".join(unknown), ", ".join(sorted(_TOP_KEYS))
        raise TraceError(f"unknown trace key(s): {keys}; valid: {valid}", "unknown_keys", keys=keys, valid=valid)
    for key in ("num_blocks", "steps"):
        if key not in obj:
            raise TraceError(f"missing '{key}'", "missing_key", key=key)
    num_blocks = _int(obj["num_blocks"], "num_blocks", 2, MAX_NUM_BLOCKS)
    try:
        block_size = limits.block_size(obj.get("block_size", DEFAULT_BLOCK_SIZE))
    except ValueError:
        low, high, got = limits.MIN_BLOCK_SIZE, limits.MAX_BLOCK_SIZE, repr(obj.get("block_size"))[:40]
        raise TraceError(f"block size must be an integer in {low}..{high}, got {got}", "bad_block_size", low=low,
                         high=high, got=got) from None
    hash_name = obj.get("hash", DEFAULT_HASH)
    try:
        get_hash_fn(hash_name)
    except ValueError as exc:
        raise TraceError(str(exc), "unknown_hash", name=repr(hash_name)[:60], valid=", ".join(HASH_FUNCTIONS)) from None
    seed = obj.get("seed", DEFAULT_SEED)
    if seed is not None and not isinstance(seed, (str, int)) or isinstance(seed, bool):
        raise TraceError(f"seed must be a string or null, got {seed!r}", "bad_seed", got=repr(seed)[:40])
    seed = None if seed is None else str(seed)
    window = obj.get("sliding_window")
    if window is not None:
        window = _int(window, "sliding_window", 2, 1 << 30)
    host_blocks = obj.get("host_blocks")
    if host_blocks is not None:
        host_blocks = _int(host_blocks, "host_blocks", 1, MAX_NUM_BLOCKS)
        if window is not None:
            raise TraceError("host_blocks: a host tier is mirrored for full attention only (no sliding_window)",
                             "out_of_range", key="host_blocks", low=1, high=MAX_NUM_BLOCKS, got=host_blocks)
    for key in ("name", "description"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise TraceError(f"{key} must be a string", "not_string", key=key)
    raw_steps = obj["steps"]
    if not isinstance(raw_steps, list):
        raise TraceError(f"'steps' must be a list, got {type(raw_steps).__name__}", "steps_not_list",
                         kind=json_kind(raw_steps))
    if len(raw_steps) > MAX_TRACE_STEPS:
        raise TraceError(f"too many steps: {len(raw_steps)} (at most {MAX_TRACE_STEPS})", "too_many_steps",
                         count=len(raw_steps), limit=MAX_TRACE_STEPS)
    steps = []
    total_tokens = 0
    for i, raw in enumerate(raw_steps):
        step = _parse_step(i, raw)
        total_tokens += len(step.tokens)
        if total_tokens > MAX_TRACE_TOKENS:
            raise TraceError(f"step {i}: the trace holds more than {MAX_TRACE_TOKENS:,} tokens", "too_many_tokens",
                             step=i, limit=MAX_TRACE_TOKENS)
        steps.append(step)
    return Trace(num_blocks, tuple(steps), block_size, hash_name, seed, window,
                 obj.get("name"), obj.get("description"), host_blocks)


def _parse_step(i: int, raw: Any) -> TraceStep:
    where = f"step {i}"
    if not isinstance(raw, dict):
        raise TraceError(f"{where}: a step is a JSON object, got {type(raw).__name__}", "step_not_object", step=i,
                         kind=json_kind(raw))
    op = raw.get("op")
    if op not in OPS:
        raise TraceError(f"{where}: 'op' must be one of {', '.join(OPS)}, got {op!r}", "bad_op", step=i,
                         ops=", ".join(OPS), got=repr(op)[:40])
    unknown = sorted(set(raw) - _STEP_KEYS[op])
    if unknown:
        raise TraceError(f"{where}: unknown key(s) for {op}: {', '.join(unknown)}", "step_unknown_keys", step=i,
                         op=op, keys=", ".join(unknown))
    if op == "reset":
        note = raw.get("note")
        if note is not None and not isinstance(note, str):
            raise TraceError(f"{where}: 'note' must be a string", "not_string", step=i, key="note")
        return TraceStep("reset", "", note=note)
    rid = raw.get("id")
    if isinstance(rid, bool) or not isinstance(rid, (str, int)) or rid == "":
        raise TraceError(f"{where}: 'id' must be a non-empty string, got {rid!r}", "bad_id", step=i,
                         got=repr(rid)[:40])
    tokens: tuple[int, ...] = ()
    if op in ("add", "append"):
        if "tokens" not in raw:
            raise TraceError(f"{where}: {op} needs 'tokens'", "needs_tokens", step=i, op=op)
        if not isinstance(raw["tokens"], list):
            raise TraceError(f"{where}: 'tokens' must be a list of integers", "tokens_not_list", step=i)
        try:
            tokens = validate_token_ids(raw["tokens"])
        except CodedError as exc:  # token_not_int, token_out_of_range, no_tokens
            raise TraceError(f"{where}: {exc}", exc.code, step=i, **exc.params) from None
    salt = raw.get("salt")
    if salt is not None and not isinstance(salt, str):
        raise TraceError(f"{where}: 'salt' must be a string", "not_string", step=i, key="salt")
    note = raw.get("note")
    if note is not None and not isinstance(note, str):
        raise TraceError(f"{where}: 'note' must be a string", "not_string", step=i, key="note")
    return TraceStep(op, str(rid), tokens, salt, note)


def load_trace(path: str | Path) -> Trace:
    """Read and validate a trace file; TraceError for unreadable, non-UTF-8 or malformed files."""
    raw = read_limited(path, MAX_TRACE_BYTES, "trace file", TraceError)
    return parse_trace_text(raw, str(path))


def parse_trace_text(raw: bytes | str, where: str = "the trace") -> Trace:
    """Decode and validate trace JSON given as bytes or text (a file's content, stdin)."""
    return parse_trace(parse_json(raw, where, TraceError))


def run_trace(trace: Trace, manager: KVCacheManager | None = None) -> TraceRun:
    """Replay every step through a fresh manager (or ``manager``). TraceError names the first step
    that is impossible (an append to or free of a request that never ran, a duplicate running id)."""
    mgr = manager if manager is not None else trace.new_manager()
    refused: set[str] = set()
    outcomes: list[StepOutcome] = []
    for i, step in enumerate(trace.steps):
        if step.op in ("append", "free") and step.id in refused:
            outcomes.append(StepOutcome(step, 0, (), (), (), "skipped_refused", None, len(mgr.events),
                                        {"id": step.id, "op": step.op}, mgr.counters))
            if step.op == "free":
                refused.discard(step.id)
            continue
        try:
            if step.op == "reset":
                first = len(mgr.events)
                ok = mgr.reset_prefix_cache()
                events = tuple(mgr.events[first:])
                result = AddResult("reset", "", ok, 0, 0, error=None if ok else "reset_refused", events=events)
            elif step.op == "add":
                refused.discard(step.id)
                result = mgr.add_request(step.id, step.tokens, step.salt)
                if not result.ok:
                    refused.add(step.id)
            elif step.op == "append":
                result = mgr.append_tokens(step.id, step.tokens)
            else:
                result = mgr.free_request(step.id)
        except ValueError as exc:  # request_running, unknown_request, bad_request_id, a token code
            code = getattr(exc, "code", "") or "step_failed"
            params = getattr(exc, "params", {}) if code != "step_failed" else {"reason": str(exc)}
            params = {**params, "step": i, "op": step.op, "id": step.id}
            raise TraceError(f"step {i}: {step.op} {step.id!r}: {exc}", code, **params) from None
        params = dict(result.events[-1].params) if result.error and result.events else {}
        outcomes.append(StepOutcome(
            step, result.num_computed_tokens, result.hit_block_ids, result.new_block_ids,
            result.evicted_block_ids, result.error, result, len(mgr.events), params, mgr.counters,
        ))
    return TraceRun(trace, mgr, outcomes)
