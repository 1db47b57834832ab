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

import json
import math
import threading
import time
import unicodedata
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from kvviz.core.compare import PromptComparison, compare_prompts
from kvviz.core.hashing import DEFAULT_HASH, DEFAULT_SEED, get_hash_fn, init_none_hash, validate_block_size
from kvviz.core.timing_compare import TimingComparison
from kvviz.model.edit_timing import time_full_vs_reuse
from kvviz.model.kvstore import (
    KVStore,
    get_kv_store,
    model_key,
    prefill_cached,
    reusable_blocks,
    store_block_hashes,
)
from kvviz.model.loader import LoadedModel
from kvviz.model.prefill import PrefillResult, prefill, prefill_continue
from kvviz.model.settings import MAX_INPUT_CHARS, InputError, check_max_tokens, max_tokens_default
from kvviz.model.tokens import Tokenized, byte_decoder, clean_text, token_pieces, tokenize

#: The wrong reuse computes at most this many separate runs of changed blocks (one model call each).
MAX_COMPUTED_RUNS = 8
#: Layers from this index on count as "deep" for ``deep_layers_changed_after_edit``.
FIRST_DEEP_LAYER = 1
#: The keys ``python -m kvviz reuse --json`` prints, in order.
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


# ----------------------------------------------------------------------------- text and token diffs


def replace_char(text: str, position: int, replacement: str) -> str:
    """``text`` with the character at ``position`` replaced by ``replacement`` (one character, or
    empty to delete it). A position equal to ``len(text)`` appends."""
    if not isinstance(text, str) or not isinstance(replacement, str):
        raise InputError("text and replacement must be strings")
    if len(replacement) > 1:
        raise InputError(f"the replacement must be one character, got {len(replacement)}")
    if not 0 <= position <= len(text):
        raise InputError(f"position {position} is outside the text (0..{len(text)})")
    return text[:position] + replacement + text[position + 1 :]


@dataclass(frozen=True)
class CharEdit:
    """The smallest span that differs between two texts: ``a[start:end_a]`` became ``b[start:end_b]``."""

    start: int
    end_a: int
    end_b: int
    removed: str
    added: str

    @property
    def identical(self) -> bool:
        return self.end_a == self.start and self.end_b == self.start


def char_diff(a: str, b: str) -> CharEdit:
    """Common character prefix and suffix of two texts; what lies between is the edit."""
    n = min(len(a), len(b))
    p = 0
    while p < n and a[p] == b[p]:
        p += 1
    s = 0
    while s < n - p and a[len(a) - 1 - s] == b[len(b) - 1 - s]:
        s += 1
    return CharEdit(p, len(a) - s, len(b) - s, a[p : len(a) - s], b[p : len(b) - s])


@dataclass(frozen=True)
class TokenEdit:
    """How the token sequences differ: ``ids_a[start:end_a]`` became ``ids_b[start:end_b]`` (common
    prefix and common suffix removed); every token after the edit moved by ``shift`` positions."""

    start: int
    end_a: int
    end_b: int
    num_tokens_a: int
    num_tokens_b: int

    @property
    def identical(self) -> bool:
        return self.num_tokens_a == self.num_tokens_b and self.end_a == self.start

    @property
    def removed_tokens(self) -> int:
        return self.end_a - self.start

    @property
    def added_tokens(self) -> int:
        return self.end_b - self.start

    @property
    def shift(self) -> int:
        return self.num_tokens_b - self.num_tokens_a

    @property
    def changed_positions_a(self) -> list[int]:
        return list(range(self.start, self.end_a))

    @property
    def changed_positions_b(self) -> list[int]:
        return list(range(self.start, self.end_b))

    @property
    def moved_tokens(self) -> int:
        """Tokens after the edit whose position changed (0 when the token count stayed the same)."""
        return 0 if self.shift == 0 else self.num_tokens_b - self.end_b


def token_diff(ids_a: Sequence[int], ids_b: Sequence[int]) -> TokenEdit:
    """Common token prefix and suffix of two sequences; the rest is the edited span."""
    na, nb = len(ids_a), len(ids_b)
    n = min(na, nb)
    p = 0
    while p < n and ids_a[p] == ids_b[p]:
        p += 1
    s = 0
    while s < n - p and ids_a[na - 1 - s] == ids_b[nb - 1 - s]:
        s += 1
    return TokenEdit(p, na - s, nb - s, na, nb)


def token_char_offsets(lm: LoadedModel, text: str, num_tokens: int) -> list[int]:
    """The character offset where each of the first ``num_tokens`` tokens of ``text`` starts (for
    mapping a clicked token to a character); falls back to summing the pieces' lengths."""
    try:
        enc = lm.tokenizer(text, add_special_tokens=True, return_offsets_mapping=True)
        offsets = [int(s) for s, _e in enc["offset_mapping"]][:num_tokens]
        if len(offsets) == num_tokens:
            return offsets
    except Exception:  # noqa: BLE001 - slow tokenizers have no offsets; use the fallback below
        pass
    out, pos = [], 0
    for piece in tokenize(text, model_name=lm.source.key, max_tokens=max(1, num_tokens)).pieces[:num_tokens]:
        out.append(min(pos, max(0, len(text) - 1)))
        pos += len(piece)
    return out


def kept_chars(lm: LoadedModel, text: str, tok: Tokenized) -> int | None:
    """How many leading characters of ``text`` the kept tokens of a cut prompt cover (None if not cut)."""
    if not tok.truncated:
        return None
    n = len(tok.ids)
    try:
        enc = lm.tokenizer(text[:MAX_INPUT_CHARS], add_special_tokens=True, return_offsets_mapping=True)
        ends = [int(e) for _s, e in enc["offset_mapping"][:n]]
        if len(ends) == n:
            return max(ends, default=0)
    except Exception:  # noqa: BLE001 - slow tokenizers have no offsets: sum the pieces instead
        pass
    return min(len(text), sum(len(p) for p in tok.pieces))


def describe_char(ch: str) -> str:
    """A character with its code point and Unicode name, for messages about invisible edits."""
    if not ch:
        return "nothing"
    parts = []
    for c in ch:
        name = unicodedata.name(c, "control character" if unicodedata.category(c) == "Cc" else "unnamed")
        shown = c if c.isprintable() and not c.isspace() else ""
        parts.append(f"{shown!r} U+{ord(c):04X} {name}" if shown else f"U+{ord(c):04X} {name}")
    return ", ".join(parts)


def invisible_chars(text: str) -> list[str]:
    """The distinct control and format characters in ``text`` (Unicode Cc/Cf: zero-width spaces, BOMs,
    bidi marks...), other than newline, tab and carriage return, in order of first appearance."""
    return list(dict.fromkeys(c for c in text if unicodedata.category(c) in ("Cc", "Cf") and c not in "\n\t\r"))


# ----------------------------------------------------------------------------- presets


PRESETS_PATH = Path(__file__).resolve().parents[2] / "assets" / "edit_presets.json"


@dataclass(frozen=True)
class EditPreset:
    """A prompt pair for the page: the original ``a``, its edit ``b``, and the block size to show."""

    id: str
    title: str
    description: str
    a: str
    b: str
    block_size: int


def _preset_text(spec: object, texts: dict[str, str], a: str | None) -> str:
    if isinstance(spec, str):
        if spec.startswith("$"):
            if spec[1:] not in texts:
                raise ValueError(f"unknown text {spec!r}")
            return texts[spec[1:]]
        return spec
    if isinstance(spec, dict) and a is not None and isinstance(spec.get("replace"), list) and len(spec["replace"]) == 2:
        old, new = spec["replace"]
        if old not in a:
            raise ValueError(f"{old!r} does not occur in prompt a")
        return a.replace(old, new, 1)
    raise ValueError(f"bad prompt spec {spec!r}")


def load_edit_presets(path: Path | str | None = None) -> list[EditPreset]:
    """The presets of ``assets/edit_presets.json`` (see its ``about``), texts resolved."""
    data = json.loads(Path(path or PRESETS_PATH).read_text(encoding="utf-8"))
    texts = data.get("texts", {})
    out = []
    for item in data["presets"]:
        a = _preset_text(item["a"], texts, None)
        b = _preset_text(item["b"], texts, a)
        out.append(EditPreset(item["id"], item["title"], item.get("description", ""), a, b,
                              validate_block_size(int(item.get("block_size", 16)))))
    return out


# ----------------------------------------------------------------------------- the edit (fast) step


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


_LABEL_A, _LABEL_B = "original prompt (A)", "edited prompt (B)"


def check_reuse_inputs(text_a: object, text_b: object, max_tokens: int | None = None) -> None:
    """The input checks ``run_edit`` makes (a bad token limit, empty or non-text prompts), with the same
    messages, but without a model: callers reject bad input before paying for a model load."""
    for label, text in ((_LABEL_A, text_a), (_LABEL_B, text_b)):
        try:
            if max_tokens is not None:
                check_max_tokens(max_tokens)
            clean_text(text)
        except InputError as exc:
            raise InputError(f"{label}: {exc}") from exc


def _tokenize_pair(lm: LoadedModel, text_a: str, text_b: str, max_tokens: int | None) -> tuple[Tokenized, Tokenized]:
    try:
        tok_a = _tokenize(lm, text_a, max_tokens)
    except InputError as exc:
        raise InputError(f"{_LABEL_A}: {exc}") from exc
    try:
        tok_b = _tokenize(lm, text_b, max_tokens)
    except InputError as exc:
        raise InputError(f"{_LABEL_B}: {exc}") from exc
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


def run_edit(
    lm: LoadedModel,
    text_a: str,
    text_b: str,
    block_size: int = 16,
    hash_name: str = DEFAULT_HASH,
    seed: str | None = DEFAULT_SEED,
    max_tokens: int | None = None,
    store: KVStore | None = None,
) -> EditReport:
    """The engine's view of the edit: compare the chains, then prefill B on top of A's stored blocks.

    Raises InputError for empty prompts, a bad block size, hash name or seed.
    """
    validate_block_size(block_size)
    get_hash_fn(hash_name)
    if seed is not None and not isinstance(seed, str):
        raise InputError("the seed must be text")
    seed = seed or None  # an empty seed box = PYTHONHASHSEED unset: vLLM's default resolution
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
    notices = [f"{label}: {tok.notice}" for label, tok in (("A", tok_a), ("B", tok_b)) if tok.notice]
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
        next_token_reuse=_piece(lm, next_id),
        logits_reuse=logits.numpy().astype(np.float32, copy=True),
        kept_chars_a=kept_chars(lm, text_a, tok_a),
        kept_chars_b=kept_chars(lm, text_b, tok_b),
        max_tokens=tok_b.max_tokens,
    )


def _bytes_text(raw: bytes) -> str:
    """UTF-8 text of ``raw``, with bytes that are not part of a whole character as ``<0xNN>``."""
    out: list[str] = []
    i = 0
    while i < len(raw):
        for width in (1, 2, 3, 4):
            try:
                out.append(raw[i : i + width].decode("utf-8"))
                i += width
                break
            except UnicodeDecodeError:
                continue
        else:
            out.append(f"<0x{raw[i]:02X}>")
            i += 1
    return "".join(out)


def _piece(lm: LoadedModel, token_id: int) -> str:
    """One token's text; bytes that do not complete a character are shown as ``<0xNN>``."""
    try:
        text = str(lm.tokenizer.decode([token_id]))
        if "\ufffd" not in text:
            return text
        raw_token = lm.tokenizer.convert_ids_to_tokens([token_id])[0]
        byte_map = byte_decoder()
        if raw_token and all(ch in byte_map for ch in raw_token):
            raw = bytes(byte_map[ch] for ch in raw_token)
            return _bytes_text(raw)
        return token_pieces(lm.tokenizer, [token_id])[0]
    except Exception:  # noqa: BLE001 - display only
        return f"<{token_id}>"


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

    full_prefill_ms: float
    reuse_prefill_ms: float
    logits_max_abs_diff_reuse: float
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
    a_full_prefill_ms: float = 0.0
    timing: TimingComparison | None = None  # repeated timings of both sides (None: nothing reused)

    @property
    def layer0_unchanged_after_edit(self) -> bool | None:
        if self.layer0_after_max_abs_diff is None:
            return None
        return self.layer0_after_max_abs_diff == 0.0

    @property
    def speedup(self) -> float | None:
        """Median full prefill of B / median prefill of B on the reused K/V; None when nothing is reused
        or the difference is within the noise (never below 1)."""
        return self.timing.speedup if self.timing is not None else None

    @property
    def saved_ms(self) -> float | None:
        """Median time the reuse saved; None when nothing is reused or it is within the noise (never < 0)."""
        return self.timing.saved_ms if self.timing is not None else None

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
        next_token_correct=_piece(lm, id_c),
        next_token_wrong=_piece(lm, id_w),
        prob_correct_top=float(p_c[id_c]),
        prob_wrong_of_correct_top=float(p_w[id_c]),
        continue_ms=result.prefill_ms,
    )


def run_proof(lm: LoadedModel, edit: EditReport) -> ProofReport:
    """Full prefills, K/V difference maps, reuse exactness and the wrong reuse for one edit."""
    ids_a, ids_b = edit.ids_a, edit.ids_b
    nb = len(ids_b)
    b_full = full_prefill(lm, ids_b)
    # A over exactly B's length: identical shapes, so equal inputs give bit-identical K/V.
    a_ids_same_len = (ids_a[:nb] + [_pad_id(lm)] * max(0, nb - len(ids_a)))
    a_full = full_prefill(lm, a_ids_same_len)
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
    logits_full = b_full.last_logits
    logits_reuse = torch.from_numpy(edit.logits_reuse)
    next_full = int(torch.argmax(logits_full))
    wrong = _wrong_reuse(lm, edit, a_full, b_full)
    # timed last, after every other forward pass of the proof
    timing = time_full_vs_reuse(lm, ids_b, b_full.keys, b_full.values, edit.reused_tokens)
    return ProofReport(
        full_prefill_ms=timing.slow_median_ms if timing else b_full.prefill_ms,
        reuse_prefill_ms=timing.fast_median_ms if timing else edit.reuse_prefill_ms,
        logits_max_abs_diff_reuse=float((logits_full - logits_reuse).abs().max()),
        next_token_id_full=next_full,
        next_token_full=_piece(lm, next_full),
        heat_k=heat_k,
        heat_v=heat_v,
        num_layers=len(b_full.keys),
        first_changed_token=first,
        prefix_max_abs_diff=prefix_max,
        same_after_positions=after,
        layer0_after_max_abs_diff=layer0_after,
        deep_after_max_abs_diff=deep_after,
        wrong_reuse=wrong,
        a_full_prefill_ms=a_full.prefill_ms,
        timing=timing,
    )


# ----------------------------------------------------------------------------- both, as the CLI reports


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


__all__ = [
    "CLI_KEYS",
    "CharEdit",
    "EditPreset",
    "EditReport",
    "PRESETS_PATH",
    "ProofReport",
    "TokenEdit",
    "WrongReuse",
    "check_reuse_inputs",
    "invisible_chars",
    "char_diff",
    "clear_full_prefill_cache",
    "cli_summary",
    "describe_char",
    "full_prefill",
    "load_edit_presets",
    "replace_char",
    "run_edit",
    "run_proof",
    "run_reuse_experiment",
    "token_char_offsets",
    "token_diff",
    "wrong_reuse_dict",
]
