"""An engine is ready before its first step: its model's step weights are packed (and the compiled kernel loaded,
where it applies) when the engine is built, so no request pays for them."""

from __future__ import annotations

from tiny_llm import tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.engine import weights as W


def test_the_weights_are_packed_when_the_engine_is_built_and_reused_by_its_steps():
    lm = tiny_lm(seed=11)
    assert W._PACKED.get(lm.model) is None
    engine = LLMEngine(lm, EngineConfig(block_size=4, kv_cache_bytes=64 * 4 * 256))
    packed = W._PACKED.get(lm.model)
    assert packed is not None and packed.current()
    engine.add_request("r", [1, 2, 3, 4, 5], SamplingParams(max_tokens=2, ignore_eos=True))
    while engine.has_unfinished_requests():
        engine.step()
    assert W._PACKED.get(lm.model) is packed  # the steps used the pack made at build time
