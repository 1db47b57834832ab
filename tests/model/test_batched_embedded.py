"""Batched forward passes on the embedded model (native decoder): each request of a packed pass gets its
own logits and K/V, as if it had run alone; the scheduler's runner uses it."""

from __future__ import annotations

import weakref

import pytest
import torch

from kvviz.model import load_model, prefill, prefill_continue
from kvviz.model.prefill import _run_batch

pytestmark = pytest.mark.model
TOL = 1e-4


@pytest.fixture(scope="module")
def lm():
    model = load_model()
    if model.info.backend != "native":
        pytest.skip("the embedded model is not on the native decoder here")
    return model


def _ids(lm, n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(100, 20000, (n,), generator=g).tolist()


def test_packed_pass_matches_one_request_a_pass(lm):
    shapes = [(0, 7), (16, 1), (96, 16), (300, 40), (33, 3)]  # (prefix tokens, new tokens)
    prompts = [_ids(lm, p + n, seed) for seed, (p, n) in enumerate(shapes)]
    payloads, alone = [], []
    for (p, _), ids in zip(shapes, prompts, strict=True):
        head = prefill(lm, token_ids=ids[:p], max_tokens=p) if p else None
        data = None if head is None else [(k.unsqueeze(0), v.unsqueeze(0)) for k, v in zip(head.keys, head.values,
                                                                                           strict=True)]
        payloads.append((ids[p:], lm.new_cache(data)))
        alone.append(prefill_continue(lm, head.keys, head.values, ids) if head else prefill(lm, token_ids=ids))
    outs = _run_batch(weakref.ref(lm), payloads)
    for (cache, logits), ref in zip(outs, alone, strict=True):
        assert (logits - ref.last_logits).abs().max().item() <= TOL
        assert int(logits.argmax()) == int(ref.last_logits.argmax())
        for layer, (k, v) in enumerate(zip(ref.keys, ref.values, strict=True)):
            assert (cache.layers[layer].keys[0].cpu() - k).abs().max().item() <= TOL
            assert (cache.layers[layer].values[0].cpu() - v).abs().max().item() <= TOL


def test_a_bad_request_in_a_packed_pass_fails_alone(lm):
    good = (_ids(lm, 5, 1), lm.new_cache())
    bad = ([lm.info.vocab_size + 5], lm.new_cache())  # out of the vocabulary: the packed pass raises
    outs = _run_batch(weakref.ref(lm), [good, bad])
    assert isinstance(outs[1], Exception) and not isinstance(outs[0], Exception)
    assert outs[0][0].get_seq_length() == 5  # the good request's cache grew once, not twice
    ref = prefill(lm, token_ids=good[0])
    assert (outs[0][1] - ref.last_logits).abs().max().item() <= TOL
