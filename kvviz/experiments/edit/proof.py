"""The real-tensor proof of an edit: the engine's next-token logits for B on A's blocks against a full
recompute, K/V difference maps of A and B (plain full prefills of the model, same shapes) and the wrong
reuse (B continued from A's K/V whose prefix changed)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from kvviz.engine.prefill import prefill
from kvviz.experiments.edit.diffs import piece_text
from kvviz.experiments.edit.experiment import EditReport, full_prefills
from kvviz.experiments.edit.timing import EditTiming
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import PrefillResult, prefill_continue

#: The wrong reuse computes at most this many separate runs of changed blocks (one model call each).
MAX_COMPUTED_RUNS = 8
#: Layers from this index on count as "deep" for ``deep_layers_changed_after_edit``.
FIRST_DEEP_LAYER = 1


def reusable_blocks(num_tokens: int, block_size: int, hit_blocks: int) -> int:
    """Hit blocks an engine may use: at most ``(num_tokens - 1) // block_size`` (the last prompt token is
    always computed, for the next-token logits)."""
    return max(0, min(hit_blocks, (num_tokens - 1) // block_size))


# ----------------------------------------------------------------------------- the proof


@dataclass(frozen=True)
class WrongReuse:
    """B continued from A's K/V for its invalidated blocks (same own tokens, changed prefix)."""

    blocks: list[int]  # B's block indices whose K/V were wrongly taken from A
    reused_tokens: int  # tokens whose K/V came from A (hits and wrongly reused blocks)
    wrong_tokens: int  # of those, tokens in invalidated blocks
    computed_tokens: int
    logits_max_abs_diff: float
    kl: float  # KL(correct || wrong) of the next-token distributions, in nats
    next_token_id_correct: int
    next_token_id_wrong: int
    next_token_correct: str
    next_token_wrong: str
    prob_correct_top: float  # probability of the correct top token under the correct distribution
    prob_wrong_of_correct_top: float  # ... and under the wrong one
    continue_ms: float

    @property
    def next_token_changed(self) -> bool:
        return self.next_token_id_correct != self.next_token_id_wrong


@dataclass(frozen=True)
class ProofReport:
    """The real-tensor proof for one edit (plain data, picklable).

    ``heat_k[l, p]`` / ``heat_v[l, p]``: max |A - B| over heads and head_dim of layer ``l``'s K (V) at
    position ``p``, for ``p < min(len A, len B)``.
    """

    logits_max_abs_diff_reuse: float  # engine, B on A's blocks vs B recomputed (None: no logits)
    next_token_id_full: int
    next_token_full: str
    heat_k: np.ndarray = field(repr=False)
    heat_v: np.ndarray = field(repr=False)
    num_layers: int = 0
    first_changed_token: int | None = None
    prefix_max_abs_diff: float | None = None  # over positions before the first change, all layers
    same_after_positions: list[int] = field(default_factory=list)  # after the edit, same id and position
    layer0_after_max_abs_diff: float | None = None
    deep_after_max_abs_diff: float | None = None
    wrong_reuse: WrongReuse | None = None
    reference: str = "engine"  # what the reused B's logits are compared with: "engine" (B recomputed
    # under a fresh salt) or "model" (a plain full prefill, when nothing is reused and there is no timing)

    @property
    def layer0_unchanged_after_edit(self) -> bool | None:
        if self.layer0_after_max_abs_diff is None:
            return None
        return self.layer0_after_max_abs_diff == 0.0

    @property
    def deep_layers_changed_after_edit(self) -> bool | None:
        if self.deep_after_max_abs_diff is None:
            return None
        return self.deep_after_max_abs_diff > 0.0

    @property
    def prefix_identical(self) -> bool | None:
        if self.prefix_max_abs_diff is None:
            return None
        return self.prefix_max_abs_diff == 0.0


def _pad_id(lm: LoadedModel) -> int:
    tok = lm.tokenizer
    for attr in ("pad_token_id", "eos_token_id", "bos_token_id"):
        value = getattr(tok, attr, None)
        if isinstance(value, int) and value >= 0:
            return value
    return 0


def _heat(a: Sequence[torch.Tensor], b: Sequence[torch.Tensor], n: int) -> np.ndarray:
    """[layers, n]: max |a - b| over kv heads and head_dim at each of the first n positions."""
    if n == 0:
        return np.zeros((len(a), 0), dtype=np.float32)
    rows = [(x[:, :n].float() - y[:, :n].float()).abs().amax(dim=(0, 2)) for x, y in zip(a, b, strict=True)]
    return torch.stack(rows).numpy().astype(np.float32)


def _distribution_gap(correct: torch.Tensor, wrong: torch.Tensor) -> tuple[float, float]:
    """(max |logit difference|, KL(correct || wrong) in nats), in float64."""
    c, w = correct.double(), wrong.double()
    lp, lq = torch.log_softmax(c, -1), torch.log_softmax(w, -1)
    kl = float((lp.exp() * (lp - lq)).sum())
    return float((c - w).abs().max()), max(0.0, kl)


def _slice(tensors: Sequence[torch.Tensor], lo: int, hi: int) -> list[torch.Tensor]:
    return [t[:, lo:hi] for t in tensors]


def _cat(a: list[torch.Tensor], b: list[torch.Tensor]) -> list[torch.Tensor]:
    if not a:
        return list(b)
    return [torch.cat([x, y], dim=1) for x, y in zip(a, b, strict=True)]


def _wrong_reuse(lm: LoadedModel, edit: EditReport, a_full: PrefillResult, b_full: PrefillResult) -> WrongReuse | None:
    """Emulate an engine that keys blocks by their own tokens only: it reuses A's K/V for every block of
    B whose tokens equal A's block at the same position (hits and invalidated blocks), computes the
    other blocks on top of whatever it has, and finally the tail. None when no block is invalidated."""
    comp = edit.comparison
    bs = edit.block_size
    ids = edit.ids_b
    limit = reusable_blocks(len(ids), bs, len(ids) // bs)
    usable = [blk.status in ("hit", "invalidated") for blk in comp.blocks[:limit]]
    wrong = [blk.index for blk in comp.blocks[:limit] if blk.status == "invalidated"]
    if not wrong:
        return None
    # runs of blocks [i, j) that are all reused from A or all computed, up to the last invalidated one;
    # at most MAX_COMPUTED_RUNS computed runs (each is a model call), the rest is the computed tail
    runs: list[tuple[int, int, bool]] = []
    i, end, computed_runs = 0, wrong[-1] + 1, 0
    while i < end:
        j = i
        while j < end and usable[j] == usable[i]:
            j += 1
        if not usable[i]:
            computed_runs += 1
            if computed_runs > MAX_COMPUTED_RUNS:
                break
        runs.append((i, j, usable[i]))
        i = j
    while runs and not runs[-1][2]:
        runs.pop()
    last = runs[-1][1] if runs else 0
    wrong = [b for b in wrong if b < last]
    if not wrong:
        return None
    keys: list[torch.Tensor] = []
    values: list[torch.Tensor] = []
    for i, j, reuse in runs:
        lo, hi = i * bs, j * bs
        if reuse:
            keys, values = _cat(keys, _slice(a_full.keys, lo, hi)), _cat(values, _slice(a_full.values, lo, hi))
        elif lo == 0:
            part = prefill(lm, token_ids=ids[:hi], max_tokens=hi)
            keys, values = list(part.keys), list(part.values)
        else:
            part = prefill_continue(lm, keys, values, ids[:hi])
            keys, values = list(part.keys), list(part.values)
    result = prefill_continue(lm, keys, values, ids)
    diff, kl = _distribution_gap(b_full.last_logits, result.last_logits)
    id_c, id_w = int(torch.argmax(b_full.last_logits)), int(torch.argmax(result.last_logits))
    p_c = torch.softmax(b_full.last_logits.double(), -1)
    p_w = torch.softmax(result.last_logits.double(), -1)
    reused = sum(1 for u in usable[:last] if u) * bs
    return WrongReuse(
        blocks=wrong,
        reused_tokens=reused,
        wrong_tokens=len(wrong) * bs,
        computed_tokens=len(ids) - reused,
        logits_max_abs_diff=diff,
        kl=kl,
        next_token_id_correct=id_c,
        next_token_id_wrong=id_w,
        next_token_correct=piece_text(lm, id_c),
        next_token_wrong=piece_text(lm, id_w),
        prob_correct_top=float(p_c[id_c]),
        prob_wrong_of_correct_top=float(p_w[id_c]),
        continue_ms=result.prefill_ms,
    )


def run_proof(lm: LoadedModel, edit: EditReport, timing: EditTiming | None = None) -> ProofReport:
    """K/V difference maps, reuse exactness and the wrong reuse for one edit; the reused B's logits are
    compared with ``timing``'s first full recompute on the engine when there is one."""
    ids_a, ids_b = edit.ids_a, edit.ids_b
    nb = len(ids_b)
    # A over exactly B's length, both computed alone: identical shapes, so equal inputs give bit-identical K/V
    # (each is a recompute, no prefix-cache read: the identity is computed, not a shared block).
    a_ids_same_len = (ids_a[:nb] + [_pad_id(lm)] * max(0, nb - len(ids_a)))
    b_full, a_full = full_prefills(lm, [ids_b, a_ids_same_len])
    n = min(len(ids_a), nb)
    heat_k = _heat(a_full.keys, b_full.keys, n)
    heat_v = _heat(a_full.values, b_full.values, n)
    both = np.maximum(heat_k, heat_v) if n else heat_k
    first = edit.first_changed_token
    prefix_end = n if first is None else min(first, n)
    prefix_max = float(both[:, :prefix_end].max()) if prefix_end > 0 else None
    after = [] if first is None else [p for p in range(first + 1, n) if ids_a[p] == ids_b[p]]
    layer0_after = float(both[0, after].max()) if after else None
    deep_after = float(both[FIRST_DEEP_LAYER:, after].max()) if after and both.shape[0] > FIRST_DEEP_LAYER else None
    engine_ref = timing is not None and timing.full_logits is not None
    logits_full = torch.from_numpy(timing.full_logits) if engine_ref else b_full.last_logits.float()
    logits_reuse = torch.from_numpy(edit.logits_reuse) if edit.logits_reuse is not None else logits_full
    next_full = int(torch.argmax(logits_full))
    wrong = _wrong_reuse(lm, edit, a_full, b_full)
    return ProofReport(
        logits_max_abs_diff_reuse=float((logits_full - logits_reuse).abs().max()),
        next_token_id_full=next_full,
        next_token_full=piece_text(lm, next_full),
        heat_k=heat_k,
        heat_v=heat_v,
        num_layers=len(b_full.keys),
        first_changed_token=first,
        prefix_max_abs_diff=prefix_max,
        same_after_positions=after,
        layer0_after_max_abs_diff=layer0_after,
        deep_after_max_abs_diff=deep_after,
        wrong_reuse=wrong,
        reference="engine" if engine_ref else "model",
    )


# ----------------------------------------------------------------------------- both, as the CLI reports
