"""Batched forward passes of the native decoder against one request a pass: every request of a batch gets
its own logits and K/V (mixed prefix lengths, mixed new-token counts; MHA, GQA, MQA)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvviz.model import packing
from kvviz.model.llama import KVCache, LenderFailed, LlamaConfig, NativeLlamaForCausalLM

TOL = 1e-4  # fp32 CPU: the bound on logits


def random_llama(heads: int, kv_heads: int, theta: float, seed: int = 0, layers: int = 2) -> NativeLlamaForCausalLM:
    """A random tiny native Llama (no transformers involved)."""
    cfg = LlamaConfig(vocab_size=97, hidden_size=16 * heads, intermediate_size=40, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, head_dim=16, rms_norm_eps=1e-5,
                      rope_theta=theta, max_position_embeddings=512)
    model = NativeLlamaForCausalLM(cfg)
    gen = torch.Generator().manual_seed(seed)
    state = {}
    for name, param in model.state_dict(keep_vars=True).items():
        if name.endswith("norm.weight"):
            state[name] = torch.rand(param.shape, generator=gen) + 0.5
        else:
            state[name] = torch.randn(param.shape, generator=gen) * 0.2
    model.load_state_dict(state, strict=True, assign=True)
    model.lm_head.weight = model.model.embed_tokens.weight
    return model.eval()


SHAPES = {"MHA": (4, 4, 10000.0), "GQA": (4, 2, 100000.0), "MQA": (6, 1, 500.0)}


@pytest.fixture(scope="module", params=list(SHAPES), ids=list(SHAPES))
def model(request):
    return random_llama(*SHAPES[request.param])


def _prefix_cache(model: NativeLlamaForCausalLM, prefix: list[int]) -> KVCache:
    cache = model.new_cache()
    if prefix:
        with torch.inference_mode():
            model(input_ids=torch.tensor([prefix]), past_key_values=cache)
    return cache


def _copy(cache: KVCache) -> KVCache:
    if cache.get_seq_length() == 0:
        return KVCache(len(cache.layers))
    return KVCache(len(cache.layers), [(la.keys.clone(), la.values.clone()) for la in cache.layers])


def _compare(model: NativeLlamaForCausalLM, requests: list[tuple[list[int], list[int]]]) -> None:
    """Batched (one pass) vs one request a pass; logits and every layer's K/V per request."""
    prefixes = [_prefix_cache(model, p) for p, _ in requests]
    alone_caches = [_copy(c) for c in prefixes]
    batch_caches = [_copy(c) for c in prefixes]
    with torch.inference_mode():
        alone = [model(input_ids=torch.tensor([new]), past_key_values=c, logits_to_keep=1).logits[0, -1]
                 for (_, new), c in zip(requests, alone_caches, strict=True)]
        batched = model.forward_batch([new for _, new in requests], batch_caches)
    assert batched.shape == (len(requests), model.config.vocab_size)
    for i, ((prefix, new), ref) in enumerate(zip(requests, alone, strict=True)):
        assert (batched[i] - ref).abs().max().item() <= TOL, i
        assert int(batched[i].argmax()) == int(ref.argmax())
        assert batch_caches[i].get_seq_length() == len(prefix) + len(new)
        for la, lb in zip(alone_caches[i].layers, batch_caches[i].layers, strict=True):
            assert (la.keys - lb.keys).abs().max().item() <= TOL
            assert (la.values - lb.values).abs().max().item() <= TOL


def test_mixed_prefixes_and_new_token_counts(model):
    requests = [([5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15]), ([], [1, 2, 3, 4, 5, 6, 7]),
                ([3] * 40, [9]), ([20, 21], [22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32])]
    _compare(model, requests)


def test_a_batch_of_one_is_the_plain_forward(model):
    _compare(model, [([1, 2, 3], [4, 5])])


def test_prefix_tensors_handed_in_are_never_modified(model):
    cache = _prefix_cache(model, [1, 2, 3, 4])
    before = [(la.keys.clone(), la.values.clone()) for la in cache.layers]
    given_k = [la.keys for la in cache.layers]
    with torch.inference_mode():
        model.forward_batch([[5, 6], [7]], [cache, _prefix_cache(model, [9])])
    for k, (k0, _) in zip(given_k, before, strict=True):
        assert torch.equal(k, k0)


def test_bad_batches_are_refused(model):
    with pytest.raises(ValueError):
        model.forward_batch([[1], []], [model.new_cache(), model.new_cache()])
    with pytest.raises(ValueError):
        model.forward_batch([[1]], [])


def test_one_shape_batches_attend_through_views(model):
    """Equal prefixes and new-token counts (the bench's shape): no gather, one attention call."""
    plan = packing.plan_pass([8, 8, 8], [3, 3, 3], torch.device("cpu"), torch.float32)
    assert plan.padded is not None and plan.padded.q_index is None and plan.padded.mask.shape == (1, 1, 3, 11)
    _compare(model, [([i + 1] * 8, [i + 2, i + 3, i + 4]) for i in range(3)])
    _compare(model, [([], [i + 2, i + 3, i + 4]) for i in range(3)])  # no prefix: plain causal
    _compare(model, [([i + 1] * 5, [i + 2]) for i in range(4)])  # one new token each: no mask


def test_padded_plan_masks_each_request_to_its_own_keys():
    plan = packing.plan_pass([2, 0], [1, 3], torch.device("cpu"), torch.float32)
    pad = plan.padded
    assert (pad.rows, pad.queries, pad.keys) == (2, 3, 3)
    assert plan.offsets == (0, 3) and plan.starts == (0, 1) and plan.lengths == (3, 3)
    visible = pad.mask[:, 0] == 0
    assert visible[0, 0].tolist() == [True, True, True]  # request 0, position 2: its prefix and itself
    assert visible[0, 1:, 0].all() and not visible[0, 1:, 1:].any()  # padding rows: one key, dropped
    assert visible[1].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert pad.unpad.tolist() == [0, 3, 4, 5]
    assert pad.kv_index.tolist() == [0, 1, 2, 3, 4, 5]


def test_lopsided_batches_attend_per_request():
    """One long prompt among short ones: padding would more than double the attention work."""
    plan = packing.plan_pass([40, 0, 0], [1, 1, 2], torch.device("cpu"), torch.float32)
    assert plan.padded is None and len(plan.masks) == 3


@pytest.mark.parametrize("factor", [0.0, 1e9], ids=["per-request", "always-padded"])
def test_both_attention_modes_match_one_request_a_pass(model, monkeypatch, factor):
    monkeypatch.setattr(packing, "MAX_PADDING_FACTOR", factor)
    _compare(model, [([5, 6, 7, 8, 9, 10, 11, 12], [13, 14, 15]), ([], [1, 2, 3, 4, 5, 6, 7]), ([3] * 40, [9]),
                     ([20, 21], [22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32]), ([4] * 16, [1] * 16)])


def _alone(model: NativeLlamaForCausalLM, tokens: list[int], split: int) -> tuple[torch.Tensor, KVCache]:
    """``tokens`` computed by one request: ``tokens[:split]`` first, then the rest; last logits and cache."""
    cache = _prefix_cache(model, tokens[:split])
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([tokens[split:]]), past_key_values=cache, logits_to_keep=1).logits[0, -1]
    return logits, cache


def _assert_same(logits: torch.Tensor, cache: KVCache, ref_logits: torch.Tensor, ref: KVCache) -> None:
    assert (logits - ref_logits).abs().max().item() <= TOL and int(logits.argmax()) == int(ref_logits.argmax())
    assert cache.get_seq_length() == ref.get_seq_length()
    for la, lb in zip(cache.layers, ref.layers, strict=True):
        assert (la.keys - lb.keys).abs().max().item() <= TOL
        assert (la.values - lb.values).abs().max().item() <= TOL


@pytest.mark.parametrize("lent", [4, 6, 9, 12], ids=["inside-its-prefix", "its-whole-prefix", "into-its-new-tokens",
                                                    "all-of-it"])
def test_a_borrower_in_the_lenders_pass_gets_its_own_unbatched_result(model, lent):
    """Request B's first ``lent`` tokens are request A's (A: 6 cached + 6 new); in one pass B takes them
    from A's K/V of each layer and computes only its own tail, as if it had computed everything alone."""
    a_tokens = [7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18]
    b_tail = [40, 41, 42]
    lender = _prefix_cache(model, a_tokens[:6])
    borrower = KVCache(len(lender.layers), lender=lender, lent_tokens=lent)
    other = _prefix_cache(model, [3, 4])
    assert borrower.get_seq_length() == lent and borrower.on_loan
    with torch.inference_mode():
        out = model.forward_batch([a_tokens[6:], b_tail, [5, 6, 7]], [lender, borrower, other])
    _assert_same(out[0], lender, *_alone(model, a_tokens, 6))
    _assert_same(out[1], borrower, *_alone(model, a_tokens[:lent] + b_tail, lent))
    _assert_same(out[2], other, *_alone(model, [3, 4, 5, 6, 7], 2))
    assert not borrower.on_loan


def test_a_borrower_after_its_lenders_pass_takes_views_of_it(model):
    lender = _prefix_cache(model, [1, 2, 3, 4, 5, 6, 7, 8])
    first = KVCache(len(lender.layers), lender=lender, lent_tokens=5)
    second = KVCache(len(lender.layers), lender=lender, lent_tokens=8)
    with torch.inference_mode():
        plain = model(input_ids=torch.tensor([[20, 21]]), past_key_values=first, logits_to_keep=1).logits[0, -1]
        batched = model.forward_batch([[30], [31, 32]], [second, model.new_cache()])
    _assert_same(plain, first, *_alone(model, [1, 2, 3, 4, 5, 20, 21], 5))
    _assert_same(batched[0], second, *_alone(model, [1, 2, 3, 4, 5, 6, 7, 8, 30], 8))
    assert torch.equal(first.layers[0].keys[:, :, :5], lender.layers[0].keys[:, :, :5])


def test_a_borrower_whose_lender_did_not_compute_its_prefix_fails(model):
    never_ran = model.new_cache()
    with torch.inference_mode(), pytest.raises(LenderFailed):
        model.forward_batch([[1]], [KVCache(len(never_ran.layers), lender=never_ran, lent_tokens=4)])
    short = _prefix_cache(model, [1, 2])
    with torch.inference_mode(), pytest.raises(LenderFailed):  # in the same pass, but it computes too few
        model.forward_batch([[3], [9]], [short, KVCache(len(short.layers), lender=short, lent_tokens=4)])
    with pytest.raises(ValueError):
        KVCache(len(short.layers), lender=short, lent_tokens=0)


request_st = st.tuples(st.lists(st.integers(0, 96), max_size=30), st.lists(st.integers(0, 96), min_size=1, max_size=12))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=st.lists(request_st, min_size=1, max_size=6), shape=st.sampled_from(list(SHAPES)))
def test_any_batch_matches_one_request_a_pass(requests, shape):
    _compare(_MODELS[shape], requests)


_MODELS = {name: random_llama(*spec, seed=1) for name, spec in SHAPES.items()}
