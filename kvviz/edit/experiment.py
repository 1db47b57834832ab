"""The "edit one character" experiment, shared by the page, the CLI and the benchmark.

Two steps, so the page can show the engine's answer before the slower proof:

``run_edit`` (fast; what an engine does): tokenize A and B, compare their block chains
(``compare_prompts``), make sure A's blocks are in the process-wide KV store, then prefill B through
the store, computing only the tokens B cannot reuse. Measured: ``reuse_prefill_ms``.

``run_proof`` (the real-tensor proof): a full prefill of B (measured ``full_prefill_ms``); the next-token
logits of the reuse path against the full prefill (reuse is exact up to float noise); per-layer,
per-position K/V differences between A and B (exactly zero before the first changed token; layer 0
unchanged after it where a token kept its id and position); and the wrong reuse: B continued from
A's K/V for the blocks whose own tokens are equal but whose prefix changed.

Invariant of the difference maps: A's K/V are computed over exactly B's length (A cut or padded at
the end; causal attention means padding never reaches a real position), so both prompts go through
identical tensor shapes and any difference comes from the tokens alone, not from float rounding
that depends on the sequence length.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch

from kvviz.edit.diffs import CharEdit, TokenEdit, char_diff, kept_chars, piece_text, token_diff
from kvviz.edit.inputs import LABEL_A, LABEL_B, EditInputs
from kvviz.mirror.errors import CodedLine
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, init_none_hash
from kvviz.model.block_store import KVStore, model_key, store_block_hashes
from kvviz.model.kvstore import get_kv_store, prefill_cached
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import PrefillResult, prefill
from kvviz.model.settings import InputError, max_tokens_default
from kvviz.model.tokens import Tokenized, tokenize
from kvviz.sim.compare import PromptComparison, compare_prompts


@dataclass(frozen=True)
class EditReport:
    """What an engine reuses when B follows A, measured through the KV store (plain data, picklable)."""

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
    # A: was it already in the store?
    a_hit_blocks: int
    a_computed_tokens: int
    a_prefill_ms: float
    # B through the store: only its non-reused part is computed
    store_reused_tokens: int
    store_computed_tokens: int
    reuse_prefill_ms: float
    edit_ms: float
    store_stats: dict
    next_token_id_reuse: int
    next_token_reuse: str
    logits_reuse: np.ndarray = field(repr=False)
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


_FULL_CACHE: OrderedDict[tuple[str, tuple[int, ...]], PrefillResult] = OrderedDict()
_FULL_CACHE_SIZE = 3
_FULL_LOCK = threading.Lock()


def full_prefill(lm: LoadedModel, ids: Sequence[int]) -> PrefillResult:
    """A full prefill (no reuse) of exactly ``ids``, remembered for the last few prompts so that
    widget changes which keep the texts do not recompute it."""
    key = (model_key(lm), tuple(int(t) for t in ids))
    with _FULL_LOCK:
        hit = _FULL_CACHE.get(key)
        if hit is not None:
            _FULL_CACHE.move_to_end(key)
            return hit
    result = prefill(lm, token_ids=list(key[1]), max_tokens=max(1, len(key[1])))
    with _FULL_LOCK:
        _FULL_CACHE[key] = result
        while len(_FULL_CACHE) > _FULL_CACHE_SIZE:
            _FULL_CACHE.popitem(last=False)
    return result


def clear_full_prefill_cache() -> None:
    with _FULL_LOCK:
        _FULL_CACHE.clear()


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


def _ensure_in_store(lm: LoadedModel, ids: list[int], block_size: int, store: KVStore,
                     hash_name: str = DEFAULT_HASH, seed: str | None = DEFAULT_SEED) -> tuple[int, int, float]:
    """Put A's full blocks in the store (as an engine that served A holds them), keyed with the page's
    algorithm and seed. Returns (blocks already stored, tokens computed now, forward ms)."""
    hashes = store_block_hashes(ids, block_size, hash_name=hash_name, seed=seed)
    key = model_key(lm)
    stored = store.peek(key, hashes)
    if stored >= len(hashes):
        store.lookup(key, hashes)  # touch: A is in use again
        return stored, 0, 0.0
    if stored == 0:
        full = full_prefill(lm, ids)
        store.put(key, hashes, full.keys, full.values, ids, block_size, device=lm.device,
                  none_hash=init_none_hash(hash_name, seed))
        return 0, len(ids), full.prefill_ms
    cached = prefill_cached(lm, ids, block_size, store=store, hash_name=hash_name, seed=seed)
    return stored, cached.computed_tokens, cached.forward_ms


def run_edit(lm: LoadedModel, inputs: EditInputs, store: KVStore | None = None) -> EditReport:
    """The engine's view of the edit: compare the chains, then prefill B on top of A's stored blocks in
    ``store`` (the process-wide one when None). ``inputs`` passed ``edit_inputs``, so only tokenizing
    can still raise (InputError)."""
    text_a, text_b, max_tokens = inputs.text_a, inputs.text_b, inputs.max_tokens
    block_size, hash_name, seed = inputs.block_size, inputs.hash_name, inputs.seed
    store = get_kv_store() if store is None else store
    tok_a, tok_b = _tokenize_pair(lm, text_a, text_b, max_tokens)
    ids_a, ids_b = list(tok_a.ids), list(tok_b.ids)
    comparison = compare_prompts(ids_a, ids_b, block_size=block_size, hash_name=hash_name, seed=seed)
    a_hits, a_computed, a_ms = _ensure_in_store(lm, ids_a, block_size, store, hash_name, seed)
    start = time.perf_counter()
    if comparison.reused_tokens == 0:
        # nothing to reuse: the store path would be a plain full prefill; share the remembered one
        full_b = full_prefill(lm, ids_b)
        store.put(model_key(lm), store_block_hashes(ids_b, block_size, hash_name=hash_name, seed=seed), full_b.keys,
                  full_b.values, ids_b, block_size, device=lm.device, none_hash=init_none_hash(hash_name, seed))
        logits, b_reused, b_computed, b_ms = full_b.last_logits, 0, len(ids_b), full_b.prefill_ms
    else:
        cached_b = prefill_cached(lm, ids_b, block_size, store=store, max_reuse_tokens=comparison.reused_tokens,
                                  hash_name=hash_name, seed=seed)
        logits, b_reused, b_computed = cached_b.last_logits, cached_b.reused_tokens, cached_b.computed_tokens
        b_ms = cached_b.forward_ms
    edit_ms = (time.perf_counter() - start) * 1000.0
    next_id = int(torch.argmax(logits))
    notices = [CodedLine(f"{label}: {tok.notice}", getattr(tok.notice, "code", ""), label=label,
                         **getattr(tok.notice, "params", {}))
               for label, tok in (("A", tok_a), ("B", tok_b)) if tok.notice]
    return EditReport(
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
        block_size=block_size,
        hash_name=hash_name,
        seed=seed,
        model_name=lm.info.name,
        device=lm.info.device,
        dtype=lm.info.dtype,
        a_hit_blocks=a_hits,
        a_computed_tokens=a_computed,
        a_prefill_ms=round(a_ms, 3),
        store_reused_tokens=b_reused,
        store_computed_tokens=b_computed,
        reuse_prefill_ms=b_ms,
        edit_ms=round(edit_ms, 3),
        store_stats=store.stats().as_dict(),
        next_token_id_reuse=next_id,
        next_token_reuse=piece_text(lm, next_id),
        logits_reuse=logits.numpy().astype(np.float32, copy=True),
        kept_chars_a=kept_chars(lm, text_a, tok_a),
        kept_chars_b=kept_chars(lm, text_b, tok_b),
        max_tokens=tok_b.max_tokens,
    )
