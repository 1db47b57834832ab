"""Editing the last character of a 1,024-token prompt, through the page's own code path.

Keys: ``edit_last_char_ms`` (median of 3 edits: ``kvviz.edit.experiment.run_edit`` wall time, which is
tokenizing both prompts, comparing their block chains, finding A's blocks in the KV store and
prefilling only B's non-reused tail), ``edit_last_char_forward_ms`` (the model's part of it),
``edit_recomputed_tokens``, ``edit_prefill_1024_ms`` (this module's own cold full prefill of the same
1,024 tokens, median of 3 after a warm-up, no reuse) and ``edit_ratio`` = ``edit_last_char_ms /
prefill_1024_ms``. ``prefill_1024_ms`` comes from ``bench_model`` when it already ran in this process;
otherwise this module's own measurement is used and ``edit_ratio_basis`` says so.
"""

from __future__ import annotations

import statistics
import time

PREFILL_TOKENS = 1024
TARGET_RATIO = 0.10
EDIT_CHARS = ("!", "?", ";")

TARGETS = [
    ("edit_ratio", f"editing the last character of a 1,024-token prompt costs <= {TARGET_RATIO:.0%} of a cold full prefill",
     lambda r: r["edit_ratio"] <= TARGET_RATIO),
]


def prompt_of(lm, tokens: int) -> str:
    """An English prompt of at most ``tokens`` tokens (as close as whole words allow), ending in '.'."""
    from kvviz.edit.presets import load_edit_presets

    base = next(p.a for p in load_edit_presets() if p.id == "system_tail")
    words = (base + "\n\n") .split(" ") * 4
    lo, hi = 1, len(words)
    count = lambda n: len(lm.tokenizer(" ".join(words[:n]).rstrip() + ".")["input_ids"])  # noqa: E731
    while lo < hi:  # the largest word count whose text fits
        mid = (lo + hi + 1) // 2
        if count(mid) <= tokens:
            lo = mid
        else:
            hi = mid - 1
    return " ".join(words[:lo]).rstrip() + "."


def run(results: dict) -> None:
    from kvviz.edit.experiment import clear_full_prefill_cache, run_edit
    from kvviz.edit.inputs import edit_inputs
    from kvviz.model import load_model, prefill, tokenize
    from kvviz.model.block_store import KVStore

    lm = load_model()
    text_a = prompt_of(lm, PREFILL_TOKENS)
    ids = tokenize(text_a, max_tokens=PREFILL_TOKENS).ids
    store = KVStore(budget_bytes=512 * 2**20)  # a private store: nothing from earlier runs helps

    def cold() -> float:
        start = time.perf_counter()
        prefill(lm, token_ids=ids, max_tokens=len(ids))
        return (time.perf_counter() - start) * 1000.0

    cold()  # warm-up (first-call allocations), as bench_model does
    cold_ms = statistics.median(cold() for _ in range(3))

    # The page has shown A before: its blocks are in the store.
    clear_full_prefill_cache()
    run_edit(lm, edit_inputs(text_a, text_a, 16), store=store)
    edits = []
    for ch in EDIT_CHARS:
        report = run_edit(lm, edit_inputs(text_a, text_a[:-1] + ch, 16), store=store)
        edits.append(report)
    edit_ms = statistics.median(r.edit_ms for r in edits)
    forward_ms = statistics.median(r.reuse_prefill_ms for r in edits)
    basis = results.get("prefill_1024_ms")
    results["edit_prompt_tokens"] = len(ids)
    results["edit_recomputed_tokens"] = edits[-1].store_computed_tokens
    results["edit_reused_tokens"] = edits[-1].store_reused_tokens
    results["edit_last_char_ms"] = round(edit_ms, 1)
    results["edit_last_char_forward_ms"] = round(forward_ms, 1)
    results["edit_prefill_1024_ms"] = round(cold_ms, 1)
    if isinstance(basis, (int, float)) and basis > 0:
        results["edit_ratio"] = round(edit_ms / basis, 4)
        results["edit_ratio_basis"] = "prefill_1024_ms from bench_model"
    else:
        results["edit_ratio"] = round(edit_ms / cold_ms, 4)
        results["edit_ratio_basis"] = "edit_prefill_1024_ms (bench_model had not run yet; measured here)"
