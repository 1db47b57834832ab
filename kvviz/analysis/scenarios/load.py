"""Scenario files: read and validate a scenario (or a plain trace) into a ``Scenario``; the built-ins.

Built-in scenarios live in ``assets/scenarios/*.json`` with token ids from the embedded model's
tokenizer stored next to the text, so they replay identically without loading a model
(``tokenize_scenario`` refills them). Invariant: every ``Scenario`` read here passed ``parse_scenario``
(a malformed file is one ``ScenarioError`` line naming the step or key, steps counted from 1).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvviz.analysis.scenarios.block_trace import TraceError, parse_trace
from kvviz.analysis.scenarios.records import (
    MAX_REQUEST_TOKENS,
    MAX_SCENARIO_STEPS,
    USER_PLACEHOLDER,
    Scenario,
    ScenarioError,
    ScenarioStep,
    Tokenizer,
    from_trace_error,
)
from kvviz.errors import json_kind
from kvviz.util.jsonio import parse_json, read_limited

SCENARIO_DIR = Path(__file__).resolve().parents[3] / "assets" / "scenarios"
MAX_SCENARIO_BLOCKS = 256  # a scenario's pool is drawn block by block
MAX_SCENARIO_BYTES = 4 * 1024 * 1024

_TOP_KEYS = {"name", "title", "description", "block_size", "num_blocks", "hash", "seed", "sliding_window",
             "prefix_text", "user_template", "steps", "host_blocks"}
_STEP_KEYS = {"op", "id", "tokens", "text", "pieces", "salt", "note"}


def _error(step: int | None, message: str, code: str, **params: Any) -> ScenarioError:
    """A ScenarioError; when a step (1-based) is to blame, the line starts "step N: " and ``params``
    hold ``step``."""
    if step is None:
        return ScenarioError(message, code, **params)
    return ScenarioError(f"step {step}: {message}", code, step=step, **params)


def _opt_str(obj: dict[str, Any], key: str, step: int | None) -> str | None:
    value = obj.get(key)
    if value is not None and not isinstance(value, str):
        kind = json_kind(value)
        raise _error(step, f"'{key}' must be a string, got a JSON {kind}", "not_string", key=key, kind=kind)
    return value


def parse_scenario(obj: Any, name: str = "custom", tokenizer: Tokenizer | None = None) -> Scenario:
    """Validate a decoded scenario (or a plain ``kvviz simulate`` trace). A step with ``text`` but no
    ``tokens`` is tokenized with ``tokenizer``; ScenarioError (one line) for anything malformed."""
    if not isinstance(obj, dict):
        kind = json_kind(obj)
        raise ScenarioError(f"a scenario is a JSON object, got a JSON {kind}", "not_object", kind=kind)
    unknown = sorted(set(obj) - _TOP_KEYS)
    if unknown:
        keys, valid = ", ".join(unknown), ", ".join(sorted(_TOP_KEYS))
        raise ScenarioError(f"unknown scenario key(s): {keys}; valid: {valid}", "unknown_keys", keys=keys,
                            valid=valid)
    raw_steps = obj.get("steps")
    if not isinstance(raw_steps, list):
        if "steps" in obj:
            raise ScenarioError("'steps' must be a list of steps", "steps_not_list")
        raise ScenarioError("missing 'steps'", "missing_steps")
    if len(raw_steps) > MAX_SCENARIO_STEPS:
        raise ScenarioError(f"too many steps: {len(raw_steps)} (at most {MAX_SCENARIO_STEPS})", "file_too_many_steps",
                            count=len(raw_steps), limit=MAX_SCENARIO_STEPS)
    for key in ("num_blocks", "host_blocks"):
        nb = obj.get(key)
        if isinstance(nb, int) and not isinstance(nb, bool) and nb > MAX_SCENARIO_BLOCKS:
            raise ScenarioError(f"{key} must be at most {MAX_SCENARIO_BLOCKS} for a scenario (the pool is "
                                f"drawn block by block), got {nb}", "too_many_blocks", limit=MAX_SCENARIO_BLOCKS,
                                value=nb, key=key)
    texts: list[str | None] = []
    pieces: list[tuple[str, ...] | None] = []
    trace_steps: list[dict[str, Any]] = []
    for i, raw in enumerate(raw_steps):
        n = i + 1
        if not isinstance(raw, dict):
            kind = json_kind(raw)
            raise _error(n, f"a step is a JSON object, got a JSON {kind}", "step_not_object", kind=kind)
        bad = sorted(set(raw) - _STEP_KEYS)
        if bad:
            keys = ", ".join(bad)
            raise _error(n, f"unknown key(s): {keys}", "step_unknown_keys", keys=keys)
        text = _opt_str(raw, "text", n)
        step = {k: v for k, v in raw.items() if k not in ("text", "pieces")}
        step_pieces = raw.get("pieces")
        if raw.get("op") in ("add", "append") and "tokens" not in raw and text is not None:
            if tokenizer is None:
                raise _error(n, "has 'text' but no 'tokens'; tokenize the scenario first", "text_without_tokens")
            if not text:
                raise _error(n, "'text' is empty", "empty_text")
            ids, step_pieces = tokenizer(text)
            step["tokens"] = list(ids)
        if step_pieces is not None:
            if not isinstance(step_pieces, (list, tuple)) or not all(isinstance(p, str) for p in step_pieces):
                raise _error(n, "'pieces' must be a list of strings", "pieces_not_strings")
            if not isinstance(step.get("tokens"), list) or len(step_pieces) != len(step["tokens"]):
                raise _error(n, "'pieces' must have one entry per token", "pieces_length")
            step_pieces = tuple(step_pieces)
        if isinstance(step.get("tokens"), list) and len(step["tokens"]) > MAX_REQUEST_TOKENS:
            count = len(step["tokens"])
            raise _error(n, f"{count:,} tokens is too many for one step (at most {MAX_REQUEST_TOKENS:,})",
                         "step_too_many_tokens", count=count, limit=MAX_REQUEST_TOKENS)
        texts.append(text)
        pieces.append(step_pieces)
        trace_steps.append(step)
    trace_obj = {k: obj[k] for k in ("block_size", "num_blocks", "hash", "seed", "sliding_window", "host_blocks")
                 if k in obj}
    trace_obj["steps"] = trace_steps
    try:
        trace = parse_trace(trace_obj)
    except TraceError as exc:
        raise from_trace_error(exc) from None
    title = _opt_str(obj, "title", None) or obj.get("name") or name
    description = _opt_str(obj, "description", None) or ""
    prefix_text = _opt_str(obj, "prefix_text", None)
    user_template = _opt_str(obj, "user_template", None)
    if user_template is not None and USER_PLACEHOLDER not in user_template:
        raise ScenarioError(f"'user_template' must contain {USER_PLACEHOLDER}", "bad_user_template",
                            placeholder=USER_PLACEHOLDER)
    steps = tuple(
        ScenarioStep(s.op, s.id, s.tokens, s.salt, texts[i], pieces[i], s.note)
        for i, s in enumerate(trace.steps)
    )
    scenario = Scenario(
        name=str(_opt_str(obj, "name", None) or name), title=str(title), description=description,
        num_blocks=trace.num_blocks, steps=steps, block_size=trace.block_size, hash=trace.hash,
        seed=trace.seed, sliding_window=trace.sliding_window, prefix_text=prefix_text,
        user_template=user_template, host_blocks=trace.host_blocks,
    )
    return scenario


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
        builtin = ", ".join(builtin_names())
        raise ScenarioError(f"unknown scenario {name!r}; built-in: {builtin}", "unknown_scenario", name=name,
                            builtin=builtin)
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
