"""What a hash collision serves: the model continues from another prompt's K/V."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from kvviz.engine.prefill import prefill
from kvviz.experiments.security.collisions import CollisionDemo
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import PrefillResult, prefill_continue
from kvviz.model.settings import InputError, check_count

# ----------------------------------------------------------------------------- a collision's consequence


@dataclass
class CollisionLeak:
    """Prompt B prefilled correctly vs as a colliding pool serves it (A's K/V for the served blocks)."""

    served_tokens: int
    correct_ids: list[int]
    served_ids: list[int]
    correct_text: str
    served_text: str
    logits_max_abs_diff: float
    next_token_changed: bool

    def as_dict(self) -> dict[str, Any]:
        return {"served_tokens": self.served_tokens, "correct_continuation": self.correct_text,
                "served_continuation": self.served_text, "logits_max_abs_diff": round(self.logits_max_abs_diff, 4),
                "next_token_changed": self.next_token_changed}


def _greedy(lm: LoadedModel, first: PrefillResult, ids: list[int], n: int) -> list[int]:
    """``n`` greedy tokens after ``first`` (a prefill of ``ids``), each step continuing its own K/V."""
    out: list[int] = []
    res = first
    seq = list(ids)
    for _ in range(n):
        nxt = int(torch.argmax(res.last_logits))
        out.append(nxt)
        if len(out) == n:
            break
        seq.append(nxt)
        res = prefill_continue(lm, res.keys, res.values, seq)
    return out


def collision_leak(lm: LoadedModel, demo: CollisionDemo, new_tokens: int = 6) -> CollisionLeak:
    """What the model says when B's served blocks carry A's K/V (the collision) vs B's own K/V."""
    check_count("new_tokens", new_tokens, 1, 32)
    if not demo.served_block_ids:
        raise InputError("no block was served: find a collision first")
    a, b = list(demo.tokens_a), list(demo.tokens_b)
    served = demo.hit_blocks * demo.block_size
    full_a = prefill(lm, token_ids=a, max_tokens=len(a))
    correct = prefill(lm, token_ids=b, max_tokens=len(b))
    wrong = prefill_continue(lm, [k[:, :served] for k in full_a.keys], [v[:, :served] for v in full_a.values], b)
    diff = float((correct.last_logits - wrong.last_logits).abs().max())
    correct_ids = _greedy(lm, correct, b, new_tokens)
    served_ids = _greedy(lm, wrong, b, new_tokens)
    tok = lm.tokenizer
    return CollisionLeak(served, correct_ids, served_ids, tok.decode(correct_ids), tok.decode(served_ids), diff,
                         correct_ids[0] != served_ids[0])
