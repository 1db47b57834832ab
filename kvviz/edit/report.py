"""The edit experiment as ``python -m kvviz reuse --json`` reports it (``CLI_KEYS``, one schema)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict

from kvviz.edit.experiment import EditReport, run_edit
from kvviz.edit.inputs import EditInputs
from kvviz.edit.proof import ProofReport, WrongReuse, run_proof
from kvviz.model.block_store import KVStore
from kvviz.model.loader import LoadedModel


def _num(x: float | None, digits: int = 6) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def _wrong(get: Callable[[WrongReuse], object]) -> Callable[[EditReport, ProofReport], object]:
    """A wrong-reuse value, null when B has no invalidated block."""
    return lambda _e, p: get(p.wrong_reuse) if p.wrong_reuse else None


CLI_FIELDS: tuple[tuple[str, Callable[[EditReport, ProofReport], object]], ...] = (
    ("num_tokens_a", lambda e, _p: e.num_tokens_a),
    ("num_tokens_b", lambda e, _p: e.num_tokens_b),
    ("first_changed_token", lambda e, _p: e.first_changed_token),
    ("reused_tokens", lambda e, _p: e.reused_tokens),
    ("recomputed_tokens", lambda e, _p: e.recomputed_tokens),
    ("logits_max_abs_diff_reuse", lambda _e, p: _num(p.logits_max_abs_diff_reuse)),
    ("logits_max_abs_diff_wrong_reuse", _wrong(lambda w: _num(w.logits_max_abs_diff))),
    ("kl_wrong_reuse", _wrong(lambda w: _num(w.kl))),
    ("next_token_changed_wrong_reuse", _wrong(lambda w: w.next_token_changed)),
    ("layer0_unchanged_after_edit", lambda _e, p: p.layer0_unchanged_after_edit),
    ("deep_layers_changed_after_edit", lambda _e, p: p.deep_layers_changed_after_edit),
    ("full_prefill_ms", lambda _e, p: round(p.full_prefill_ms, 3)),
    ("reuse_prefill_ms", lambda _e, p: round(p.reuse_prefill_ms, 3)),
    ("prefill_timing", lambda _e, p: p.timing.as_dict() if p.timing else None),
)
"""The ``reuse --json`` schema: each key with how it is read from the edit and its proof, in output order."""
CLI_KEYS = tuple(key for key, _ in CLI_FIELDS)


def cli_summary(edit: EditReport, proof: ProofReport) -> dict[str, object]:
    """Exactly the keys of ``CLI_KEYS``, in that order, by construction (nulls where the edit leaves
    nothing to measure)."""
    return {key: get(edit, proof) for key, get in CLI_FIELDS}


def run_reuse_experiment(lm: LoadedModel, inputs: EditInputs,
                         store: KVStore | None = None) -> tuple[EditReport, ProofReport]:
    """``run_edit`` then ``run_proof``: the whole experiment, as the page shows it."""
    edit = run_edit(lm, inputs, store)
    return edit, run_proof(lm, edit)


def wrong_reuse_dict(w: WrongReuse | None) -> dict[str, object] | None:
    """Plain-data view of a wrong reuse (None stays None)."""
    if w is None:
        return None
    out = asdict(w)
    out["next_token_changed"] = w.next_token_changed
    return out
