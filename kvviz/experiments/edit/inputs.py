"""The validated inputs of one "edit one character" experiment (``EditInputs``), built once at the edge.

``edit_inputs`` is the one check: the CLI calls it after argument parsing and the page after its widgets,
both before a model is loaded or a forward pass runs; ``run_edit`` and ``run_reuse_experiment`` take the
record and trust it.
"""

from __future__ import annotations

from dataclasses import dataclass

from kvviz.errors import CodedError
from kvviz.mirror import limits
from kvviz.mirror.hashing import DEFAULT_HASH, DEFAULT_SEED, get_hash_fn
from kvviz.model.settings import InputError, check_max_tokens
from kvviz.model.tokens import clean_text

LABEL_A, LABEL_B = "original prompt (A)", "edited prompt (B)"


@dataclass(frozen=True)
class EditInputs:
    """Prompts A and B, the block size, the block hash algorithm, the NONE_HASH seed (None: vLLM's
    default resolution) and the token limit per prompt (None: the configured default). Invariant: every
    field passed ``edit_inputs``; hashable, so a page can cache on it."""

    text_a: str
    text_b: str
    block_size: limits.BlockSize = limits.DEFAULT_BLOCK_SIZE
    hash_name: str = DEFAULT_HASH
    seed: str | None = DEFAULT_SEED
    max_tokens: int | None = None


def edit_inputs(text_a: object, text_b: object, block_size: object = limits.DEFAULT_BLOCK_SIZE,
                hash_name: object = DEFAULT_HASH, seed: object = DEFAULT_SEED,
                max_tokens: object = None) -> EditInputs:
    """Raw values as ``EditInputs``; InputError (a CodedError: an English line naming the bad value, a code
    the app words: ``bad_prompt``, ``block_size_*``, ``unknown_hash``, ``seed_not_text``, max_tokens') otherwise: empty or non-text prompts, a block size out of range, an unknown hash, a non-text seed, a
    bad token limit. An empty seed means no seed (PYTHONHASHSEED unset)."""
    if max_tokens is not None:
        max_tokens = check_max_tokens(max_tokens)
    for prompt, label, text in (("a", LABEL_A, text_a), ("b", LABEL_B, text_b)):
        try:
            clean_text(text)
        except InputError as exc:
            raise InputError(f"{label}: {exc}", "bad_prompt", prompt=prompt, reason=exc.code,
                             detail=str(exc)) from exc
    try:
        size = limits.block_size(block_size)
        get_hash_fn(hash_name)  # type: ignore[arg-type]
    except CodedError as exc:
        raise InputError(str(exc), exc.code, **exc.params) from exc
    if seed is not None and not isinstance(seed, str):
        raise InputError("the seed must be text", "seed_not_text")
    return EditInputs(text_a, text_b, size, hash_name, seed or None, max_tokens)  # type: ignore[arg-type]
