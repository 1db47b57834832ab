"""The edit experiment as ``python -m kvviz reuse --json`` reports it (``CLI_KEYS``, one schema)."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from kvviz.experiments.edit.engine_run import get_edit_engine_loop
from kvviz.experiments.edit.experiment import EditReport, run_edit
from kvviz.experiments.edit.inputs import EditInputs
from kvviz.experiments.edit.proof import ProofReport, WrongReuse, run_proof
from kvviz.experiments.edit.timing import EditTiming, time_edit
from kvviz.model.loader import LoadedModel


def _num(x: float | None, digits: int = 6) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


@dataclass(frozen=True)
class EditExperiment:
    """The whole experiment as the page shows it: the engine's run, its timing (None: nothing reused) and
    the proof."""

    edit: EditReport
    timing: EditTiming | None
    proof: ProofReport

    @property
    def full_prefill_ms(self) -> float:
        """Median compute of B recomputed in full (B's own run when nothing is reused: it was a full one)."""
        return self.timing.comparison.slow_median_ms if self.timing else self.edit.run_b.compute_ms

    @property
    def reuse_prefill_ms(self) -> float:
        """Median compute of B on its reused prefix (B's own run when nothing is reused)."""
        return self.timing.comparison.fast_median_ms if self.timing else self.edit.run_b.compute_ms


Getter = Callable[[EditExperiment], object]


def _wrong(get: Callable[[WrongReuse], object]) -> Getter:
    """A wrong-reuse value, null when B has no invalidated block."""
    return lambda x: get(x.proof.wrong_reuse) if x.proof.wrong_reuse else None


CLI_FIELDS: tuple[tuple[str, Getter], ...] = (
    ("num_tokens_a", lambda x: x.edit.num_tokens_a),
    ("num_tokens_b", lambda x: x.edit.num_tokens_b),
    ("first_changed_token", lambda x: x.edit.first_changed_token),
    ("reused_tokens", lambda x: x.edit.engine_reused_tokens),
    ("recomputed_tokens", lambda x: x.edit.num_tokens_b - x.edit.engine_reused_tokens),
    ("logits_max_abs_diff_reuse", lambda x: _num(x.proof.logits_max_abs_diff_reuse)),
    ("logits_max_abs_diff_wrong_reuse", _wrong(lambda w: _num(w.logits_max_abs_diff))),
    ("kl_wrong_reuse", _wrong(lambda w: _num(w.kl))),
    ("next_token_changed_wrong_reuse", _wrong(lambda w: w.next_token_changed)),
    ("layer0_unchanged_after_edit", lambda x: x.proof.layer0_unchanged_after_edit),
    ("deep_layers_changed_after_edit", lambda x: x.proof.deep_layers_changed_after_edit),
    ("full_prefill_ms", lambda x: round(x.full_prefill_ms, 3)),
    ("reuse_prefill_ms", lambda x: round(x.reuse_prefill_ms, 3)),
    ("prefill_timing", lambda x: x.timing.comparison.as_dict() if x.timing else None),
)
"""The ``reuse --json`` schema: each key with how it is read from the edit and its proof, in output order."""
CLI_KEYS = tuple(key for key, _ in CLI_FIELDS)


def cli_summary(x: EditExperiment) -> dict[str, object]:
    """Exactly the keys of ``CLI_KEYS``, in that order, by construction (nulls where the edit leaves
    nothing to measure)."""
    return {key: get(x) for key, get in CLI_FIELDS}


def time_report(lm: LoadedModel, edit: EditReport) -> EditTiming | None:
    """``time_edit`` on the engine that ran ``edit``, over the tokens the engine reused."""
    loop, _ = get_edit_engine_loop(lm, edit.block_size, edit.hash_name, edit.seed)
    return time_edit(loop, edit.ids_b, edit.engine_reused_tokens)


def run_reuse_experiment(lm: LoadedModel, inputs: EditInputs) -> EditExperiment:
    """``run_edit``, ``time_report`` then ``run_proof``: the whole experiment, as the page shows it."""
    edit = run_edit(lm, inputs)
    timing = time_report(lm, edit)
    return EditExperiment(edit, timing, run_proof(lm, edit, timing))
