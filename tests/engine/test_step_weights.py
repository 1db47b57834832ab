"""The engine's packed projection weights (``StepWeights``): the products equal the model's own to fp32
rounding, and a weight changed after packing is repacked before the next step (never stale)."""

from __future__ import annotations

import torch
from tiny_llm import reference_logits, tiny_lm

from kvviz.engine import EngineConfig, LLMEngine
from kvviz.engine.runner import SeqInput
from kvviz.engine.weights import StepWeights, can_pack


def _logits(engine: LLMEngine, ids: list[int]) -> torch.Tensor:
    blocks = list(range(1, 1 + -(-len(ids) // engine.block_size)))
    return engine.runner.execute([SeqInput(ids, 0, blocks, True)], all_logits=True)


def test_packed_products_equal_linear():
    lm = tiny_lm(seed=3)
    weights = StepWeights(lm.model)
    assert weights.pack == can_pack(torch.device("cpu"), torch.float32)
    layer = lm.model.model.layers[0]
    x = torch.randn(5, layer.self_attn.q_proj.weight.shape[1])
    a = layer.self_attn
    ref = torch.cat([x @ a.q_proj.weight.T, x @ a.k_proj.weight.T, x @ a.v_proj.weight.T], dim=-1)
    with torch.inference_mode():
        got = weights.layers[0].qkv(x)
    assert torch.allclose(got, ref, atol=1e-5, rtol=1e-5)


def test_a_weight_changed_after_packing_is_repacked():
    lm = tiny_lm(seed=4)
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=1 << 20, block_size=4))
    ids = [5, 9, 2, 33, 7, 1]
    assert torch.allclose(_logits(engine, ids), reference_logits(lm, ids), atol=1e-4)
    packed = engine.runner._packed
    with torch.no_grad():
        lm.model.model.layers[1].mlp.down_proj.weight.mul_(-2.0)  # in place: same tensor, new version
    assert packed is not None and not packed.current()
    assert torch.allclose(_logits(engine, ids), reference_logits(lm, ids), atol=1e-4)
    assert engine.runner._packed is not packed


def test_a_weight_replaced_after_packing_is_repacked():
    lm = tiny_lm(seed=5)
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=1 << 20, block_size=4))
    ids = [3, 8, 13, 21, 34]
    _logits(engine, ids)
    o = lm.model.model.layers[0].self_attn.o_proj
    o.weight = torch.nn.Parameter(o.weight.detach() * 0.5, requires_grad=False)  # a new tensor
    assert torch.allclose(_logits(engine, ids), reference_logits(lm, ids), atol=1e-4)


def test_engines_over_one_model_share_its_packed_weights():
    lm = tiny_lm(seed=6)
    one = LLMEngine(lm, EngineConfig(kv_cache_bytes=1 << 20, block_size=4))
    two = LLMEngine(lm, EngineConfig(kv_cache_bytes=1 << 20, block_size=8))
    _logits(one, [1, 2, 3])
    _logits(two, [4, 5, 6])
    assert one.runner._packed is two.runner._packed is not None  # one copy of the weights per model


def test_one_row_goes_through_the_one_pass_product_over_the_models_own_weight():
    """A single row (one sequence's decode step) takes the compiled one-pass product where it is built, on the
    model's own fused weight (no copy); more rows take the packed one; both equal the model's product."""
    from kvviz.engine.kernels import compiled_op

    lm = tiny_lm(seed=7)
    weights = StepWeights(lm.model)
    a = lm.model.model.layers[0].self_attn
    qkv = weights.layers[0].qkv
    assert qkv.weight.data_ptr() == a.qkv.weight.data_ptr()  # the model's tensor itself
    gemv = compiled_op("gemv") if weights.pack else None
    assert qkv.one_row is gemv
    for rows in (1, 3):
        x = torch.randn(rows, a.q_proj.weight.shape[1])
        with torch.inference_mode():
            got = qkv(x)
        assert torch.allclose(got, x @ a.qkv.weight.T, atol=1e-5, rtol=1e-5)
