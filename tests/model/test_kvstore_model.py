"""``prefill_cached`` on the real model: a prompt sharing a prefix computes only its tail, and the
result equals a full prefill up to float noise."""

from __future__ import annotations

import pytest
import torch

from kvviz.model import load_model, prefill, tokenize
from kvviz.model.block_store import KVStore, model_key, store_block_hashes
from kvviz.model.kvstore import prefill_cached

pytestmark = pytest.mark.model

BS = 8
TEXT = "A prompt cache keeps the keys and values of every token at every layer, block by block."


@pytest.fixture(scope="module")
def lm():
    return load_model()


def test_second_prompt_computes_only_its_tail_and_matches_a_full_prefill(lm):
    store = KVStore(budget_bytes=256 * 2**20)
    ids = tokenize(TEXT).ids
    n = len(ids)
    assert n > 2 * BS
    first = prefill_cached(lm, ids, BS, store=store)
    assert first.reused_tokens == 0 and first.computed_tokens == n
    assert first.stored_blocks == n // BS == len(store)

    edited = ids[:-1] + [ids[-1] + 1]  # the last token changed
    second = prefill_cached(lm, edited, BS, store=store, owner="test")
    assert second.reused_tokens == ((n - 1) // BS) * BS and second.computed_tokens == n - second.reused_tokens
    assert second.stored_blocks == (1 if n % BS == 0 else 0)
    full = prefill(lm, token_ids=edited)
    assert float((full.last_logits - second.last_logits).abs().max()) < 1e-3
    for k_full, k_reuse, v_full, v_reuse in zip(full.keys, second.keys, full.values, second.values, strict=True):
        assert k_reuse.shape == k_full.shape and torch.allclose(k_full, k_reuse.cpu(), atol=1e-3)
        assert torch.allclose(v_full, v_reuse.cpu(), atol=1e-3)
    # the same prompt again: every full block is stored, yet the last token is recomputed
    again = prefill_cached(lm, edited, BS, store=store)
    assert again.computed_tokens == n - ((n - 1) // BS) * BS >= 1
    assert store.stats().hit_blocks >= 2 * ((n - 1) // BS)


def test_salt_isolates_and_max_reuse_caps(lm):
    store = KVStore(budget_bytes=256 * 2**20)
    ids = tokenize(TEXT).ids
    prefill_cached(lm, ids, BS, store=store, cache_salt="tenant-a")
    other = prefill_cached(lm, ids, BS, store=store, cache_salt="tenant-b", save=False)
    assert other.reused_tokens == 0
    same = prefill_cached(lm, ids, BS, store=store, cache_salt="tenant-a", max_reuse_tokens=BS + 3)
    assert same.reused_tokens == BS
    assert store.peek(model_key(lm), store_block_hashes(ids, BS, "tenant-a")) == len(ids) // BS


def test_a_loan_takes_another_prompts_prefix_and_a_failed_one_falls_back_to_the_store(lm):
    from kvviz.model.kvstore import Loan

    ids = tokenize(TEXT).ids
    full = prefill(lm, token_ids=ids)
    lent: dict = {}
    owner = prefill_cached(lm, ids[: 2 * BS + 1], BS, store=KVStore(budget_bytes=64 * 2**20),
                           on_queued=lambda cache: lent.setdefault("cache", cache))
    assert lent["cache"] is not None and owner.computed_tokens == 2 * BS + 1
    store = KVStore(budget_bytes=64 * 2**20)
    borrowed = prefill_cached(lm, ids, BS, store=store, loan=Loan(lent["cache"], 2 * BS))
    assert borrowed.reused_tokens == 2 * BS and borrowed.hit_blocks == 2 and borrowed.computed_tokens == len(ids) - 2 * BS
    assert float((full.last_logits - borrowed.last_logits).abs().max()) < 1e-3
    assert torch.allclose(borrowed.keys[0][:, : 2 * BS].cpu(), full.keys[0][:, : 2 * BS], atol=1e-3)
    never_ran = lm.new_cache()  # its request failed: the prompt computes everything itself, from the store
    fallback = prefill_cached(lm, ids, BS, store=KVStore(budget_bytes=64 * 2**20), loan=Loan(never_ran, 2 * BS))
    assert fallback.reused_tokens == 0 and fallback.computed_tokens == len(ids)
    assert float((full.last_logits - fallback.last_logits).abs().max()) < 1e-3
