"""The edit experiment as ``python -m kvviz reuse --json`` reports it (``CLI_KEYS``, one schema)."""

from __future__ import annotations

import math
from dataclasses import asdict

from kvviz.core.hashing import DEFAULT_HASH, DEFAULT_SEED
from kvviz.edit.experiment import EditReport, run_edit
from kvviz.edit.proof import ProofReport, WrongReuse, run_proof
from kvviz.model.kvstore import (
    KVStore,
)
from kvviz.model.loader import LoadedModel

CLI_KEYS = (
    "num_tokens_a",
    "num_tokens_b",
    "first_changed_token",
    "reused_tokens",
    "recomputed_tokens",
    "logits_max_abs_diff_reuse",
    "logits_max_abs_diff_wrong_reuse",
    "kl_wrong_reuse",
    "next_token_changed_wrong_reuse",
    "layer0_unchanged_after_edit",
    "deep_layers_changed_after_edit",
    "full_prefill_ms",
    "reuse_prefill_ms",
    "prefill_timing",
)




def _num(x: float | None, digits: int = 6) -> float | None:
    if x is None or not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}")


def cli_summary(edit: EditReport, proof: ProofReport) -> dict[str, object]:
    """Exactly the keys of ``CLI_KEYS`` (nulls where the edit leaves nothing to measure)."""
    wrong = proof.wrong_reuse
    out: dict[str, object] = {
        "num_tokens_a": edit.num_tokens_a,
        "num_tokens_b": edit.num_tokens_b,
        "first_changed_token": edit.first_changed_token,
        "reused_tokens": edit.reused_tokens,
        "recomputed_tokens": edit.recomputed_tokens,
        "logits_max_abs_diff_reuse": _num(proof.logits_max_abs_diff_reuse),
        "logits_max_abs_diff_wrong_reuse": _num(wrong.logits_max_abs_diff) if wrong else None,
        "kl_wrong_reuse": _num(wrong.kl) if wrong else None,
        "next_token_changed_wrong_reuse": wrong.next_token_changed if wrong else None,
        "layer0_unchanged_after_edit": proof.layer0_unchanged_after_edit,
        "deep_layers_changed_after_edit": proof.deep_layers_changed_after_edit,
        "full_prefill_ms": round(proof.full_prefill_ms, 3),
        "reuse_prefill_ms": round(proof.reuse_prefill_ms, 3),
        "prefill_timing": proof.timing.as_dict() if proof.timing else None,
    }
    assert tuple(out) == CLI_KEYS
    return out


def run_reuse_experiment(
    lm: LoadedModel,
    text_a: str,
    text_b: str,
    block_size: int = 16,
    hash_name: str = DEFAULT_HASH,
    seed: str | None = DEFAULT_SEED,
    max_tokens: int | None = None,
    store: KVStore | None = None,
) -> tuple[EditReport, ProofReport]:
    """``run_edit`` then ``run_proof``: the whole experiment, as the page shows it."""
    edit = run_edit(lm, text_a, text_b, block_size, hash_name, seed, max_tokens, store)
    return edit, run_proof(lm, edit)


def wrong_reuse_dict(w: WrongReuse | None) -> dict[str, object] | None:
    """Plain-data view of a wrong reuse (None stays None)."""
    if w is None:
        return None
    out = asdict(w)
    out["next_token_changed"] = w.next_token_changed
    return out
