"""The "edit one character" experiment, shared by the page, the CLI and the benchmark.

Steps, so the page can draw each part as soon as its numbers exist:

``plan_edit`` (no forward pass): tokenize A and B and compare their block chains (``compare_prompts``,
the mirror's rule); the token strip and the hash chains need nothing more.
``run_edit`` (what the engine does): on that plan, send A and then B through kvviz's serving engine
(``kvviz.experiments.edit.engine_run``): B reuses A's cached blocks, and the engine says how many tokens it reused and which physical blocks
B's block table shares with A's. Both requests carry a cache salt derived from A, so blocks cached by
other pages or sessions never count as B's reuse; when B's own blocks are still cached from an earlier
run (the engine would reuse more than A alone gives), A and B run again under the next salt.

``time_edit`` (kvviz.model.edit_timing): B under a fresh salt (a real full recompute) against B on a
freshly cached prefix, several times each. ``run_proof`` (kvviz.experiments.edit.proof): the real-tensor proof.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, fields

import numpy as np

from kvviz.analysis.prompt_compare import PromptComparison, compare_prompts
from kvviz.engine.prefill import prefill_alone
from kvviz.errors import CodedLine
from kvviz.experiments.edit.diffs import CharEdit, TokenEdit, char_diff, kept_chars, piece_text, token_diff
from kvviz.experiments.edit.engine_run import (
    EngineInfo,
    EngineRequestRun,
    engine_info,
    get_edit_engine_loop,
    run_prompt,
    salt_for,
)
from kvviz.experiments.edit.inputs import LABEL_A, LABEL_B, EditInputs
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import PrefillResult
from kvviz.model.settings import InputError, max_tokens_default
from kvviz.model.tokens import Tokenized, tokenize


@dataclass(frozen=True)
class EditPlan:
    """A and B tokenized and their block chains compared: what hashing alone says (plain data, picklable)."""

    text_a: str
    text_b: str
    ids_a: list[int]
    ids_b: list[int]
    pieces_a: list[str]
    pieces_b: list[str]
    notices: list[str]
    comparison: PromptComparison
    token_edit: TokenEdit
    char_edit: CharEdit
    block_size: int
    hash_name: str
    seed: str | None
    model_name: str
    device: str
    dtype: str
    # characters of A / B that the kept tokens cover (None: the prompt was not cut)
    kept_chars_a: int | None = None
    kept_chars_b: int | None = None
    max_tokens: int = 0

    @property
    def edit_beyond_limit(self) -> int | None:
        """Characters both prompts keep when the character edit lies past the token limit of a cut
        prompt (the model then sees no edit); None when the edit is inside what the model sees."""
        kept = [k for k in (self.kept_chars_a, self.kept_chars_b) if k is not None]
        if self.char_edit.identical or not kept or self.char_edit.start < min(kept):
            return None
        return min(kept)

    @property
    def num_tokens_a(self) -> int:
        return len(self.ids_a)

    @property
    def num_tokens_b(self) -> int:
        return len(self.ids_b)

    @property
    def first_changed_token(self) -> int | None:
        return self.comparison.first_changed_token

    @property
    def reused_tokens(self) -> int:
        return self.comparison.reused_tokens

    @property
    def recomputed_tokens(self) -> int:
        return self.comparison.recompute_tokens

    @property
    def reused_share(self) -> float:
        """Fraction of B's tokens whose K/V are reused rather than computed (0 for an empty B)."""
        return self.reused_tokens / self.num_tokens_b if self.num_tokens_b else 0.0

    @property
    def identical(self) -> bool:
        return self.ids_a == self.ids_b


@dataclass(frozen=True, kw_only=True)
class EditReport(EditPlan):
    """The plan plus what the engine reused when B followed A (plain data, picklable)."""

    # the two engine requests: A (the earlier one) and B (on A's cached blocks)
    run_a: EngineRequestRun
    run_b: EngineRequestRun
    engine: EngineInfo
    cache_salt: str
    edit_ms: float  # wall time of both requests, waiting included
    next_token_reuse: str

    @property
    def engine_reused_tokens(self) -> int:
        """Tokens of B the engine took from its cache (vLLM's ``num_cached_tokens``)."""
        return self.run_b.num_cached_tokens

    @property
    def shared_blocks(self) -> int:
        """Leading entries of B's block table that are A's physical blocks (the engine's hit)."""
        return self.engine_reused_tokens // self.block_size

    @property
    def logits_reuse(self) -> np.ndarray | None:
        return self.run_b.logits

    @property
    def next_token_id_reuse(self) -> int:
        return self.run_b.next_token_id


def model_key(lm: LoadedModel) -> str:
    """The namespace of a model's results: the same tokens give other K/V in another model, device or dtype."""
    return f"{lm.source.key}|{lm.info.device}|{lm.info.dtype}"


_FULL_CACHE: OrderedDict[tuple[str, tuple[tuple[int, ...], ...]], tuple[PrefillResult, ...]] = OrderedDict()
_FULL_CACHE_SIZE = 3
_FULL_LOCK = threading.Lock()


def full_prefills(lm: LoadedModel, prompts: Sequence[Sequence[int]]) -> tuple[PrefillResult, ...]:
    """Full prefills (no reuse) of exactly these prompts, each computed alone and all the same way
    (``prefill_alone``: equal prefixes give bit-equal K/V), remembered for the last few sets so that widget
    changes which keep the texts do not recompute them."""
    key = (model_key(lm), tuple(tuple(int(t) for t in ids) for ids in prompts))
    with _FULL_LOCK:
        hit = _FULL_CACHE.get(key)
        if hit is not None:
            _FULL_CACHE.move_to_end(key)
            return hit
    result = tuple(prefill_alone(lm, [list(ids) for ids in key[1]]))
    with _FULL_LOCK:
        _FULL_CACHE[key] = result
        while len(_FULL_CACHE) > _FULL_CACHE_SIZE:
            _FULL_CACHE.popitem(last=False)
    return result


_TOKENIZED: OrderedDict[tuple[str, str, int], Tokenized] = OrderedDict()
_TOKENIZED_SIZE = 8


def _tokenize(lm: LoadedModel, text: str, max_tokens: int | None) -> Tokenized:
    """``tokenize`` remembered for the last few texts: while B is edited, A is tokenized once."""
    limit = max_tokens_default() if max_tokens is None else max_tokens
    key = (lm.source.key, text, limit) if isinstance(text, str) else None
    with _FULL_LOCK:
        hit = _TOKENIZED.get(key) if key else None
        if hit is not None:
            _TOKENIZED.move_to_end(key)
            return hit
    tok = tokenize(text, model_name=lm.source.key, max_tokens=limit)
    if key:
        with _FULL_LOCK:
            _TOKENIZED[key] = tok
            while len(_TOKENIZED) > _TOKENIZED_SIZE:
                _TOKENIZED.popitem(last=False)
    return tok


def _tokenize_pair(lm: LoadedModel, text_a: str, text_b: str, max_tokens: int | None) -> tuple[Tokenized, Tokenized]:
    try:
        tok_a = _tokenize(lm, text_a, max_tokens)
    except InputError as exc:
        raise InputError(f"{LABEL_A}: {exc}") from exc
    try:
        tok_b = _tokenize(lm, text_b, max_tokens)
    except InputError as exc:
        raise InputError(f"{LABEL_B}: {exc}") from exc
    return tok_a, tok_b


_GENERATION: OrderedDict[tuple, int] = OrderedDict()
_GENERATION_SIZE = 256


def _salt(lm: LoadedModel, ids_a: list[int], inputs: EditInputs, bump: bool) -> str:
    """The salt A and B run under: one per A (and settings), the next one when ``bump``."""
    key = (model_key(lm), tuple(ids_a), inputs.block_size, inputs.hash_name, inputs.seed)
    with _FULL_LOCK:
        gen = _GENERATION.get(key, 0) + (1 if bump else 0)
        _GENERATION[key] = gen
        _GENERATION.move_to_end(key)
        while len(_GENERATION) > _GENERATION_SIZE:
            _GENERATION.popitem(last=False)
    return salt_for(*key, gen)


def plan_edit(lm: LoadedModel, inputs: EditInputs) -> EditPlan:
    """Tokenize A and B and compare their block chains (no forward pass). ``inputs`` passed ``edit_inputs``,
    so only tokenizing (InputError) can still raise."""
    text_a, text_b, max_tokens = inputs.text_a, inputs.text_b, inputs.max_tokens
    tok_a, tok_b = _tokenize_pair(lm, text_a, text_b, max_tokens)
    ids_a, ids_b = list(tok_a.ids), list(tok_b.ids)
    comparison = compare_prompts(ids_a, ids_b, block_size=inputs.block_size, hash_name=inputs.hash_name,
                                 seed=inputs.seed)
    notices = [CodedLine(f"{label}: {tok.notice}", getattr(tok.notice, "code", ""), label=label,
                         **getattr(tok.notice, "params", {}))
               for label, tok in (("A", tok_a), ("B", tok_b)) if tok.notice]
    return EditPlan(
        text_a=text_a,
        text_b=text_b,
        ids_a=ids_a,
        ids_b=ids_b,
        pieces_a=list(tok_a.pieces),
        pieces_b=list(tok_b.pieces),
        notices=notices,
        comparison=comparison,
        token_edit=token_diff(ids_a, ids_b),
        char_edit=char_diff(text_a, text_b),
        block_size=inputs.block_size,
        hash_name=inputs.hash_name,
        seed=inputs.seed,
        model_name=lm.info.name,
        device=lm.info.device,
        dtype=lm.info.dtype,
        kept_chars_a=kept_chars(lm, text_a, tok_a),
        kept_chars_b=kept_chars(lm, text_b, tok_b),
        max_tokens=tok_b.max_tokens,
    )


def run_edit(lm: LoadedModel, inputs: EditInputs, plan: EditPlan | None = None) -> EditReport:
    """A then B through the engine (see the module docstring), on ``plan`` (``plan_edit`` of the same
    inputs; made here when None). Tokenizing (InputError) or the engine (CodedError, e.g. an unsupported
    model) can raise."""
    plan = plan_edit(lm, inputs) if plan is None else plan
    ids_a, ids_b, comparison = plan.ids_a, plan.ids_b, plan.comparison
    loop, shared = get_edit_engine_loop(lm, inputs.block_size, inputs.hash_name, inputs.seed)
    start = time.perf_counter()
    for bump in (False, True):
        salt = _salt(lm, ids_a, inputs, bump)
        run_a = run_prompt(loop, ids_a, salt, block_table=True)
        run_b = run_prompt(loop, ids_b, salt, logits=True, block_table=True)
        if run_b.num_cached_tokens <= comparison.reused_tokens:
            break  # else B's own blocks were cached by an earlier run: A alone must be what B reuses
    edit_ms = (time.perf_counter() - start) * 1000.0
    return EditReport(
        **{f.name: getattr(plan, f.name) for f in fields(EditPlan)},
        run_a=run_a,
        run_b=run_b,
        engine=engine_info(loop, shared),
        cache_salt=salt,
        edit_ms=round(edit_ms, 3),
        next_token_reuse=piece_text(lm, run_b.next_token_id),
    )
