"""The engine in bf16 against transformers' ``generate`` in bf16 on the same weights (the CPU's AVX512-BF16).

Greedy tokens agree until a near tie: bf16 keeps 8 bits of mantissa, so a logit near 16-32 moves in steps
of 0.125; the engine's paged attention (grouped query rows over padded blocks) and its packed products sum
in another order than transformers, rounding the two best logits of a near tie the other way. At the first
token where they part, transformers' own logits for the two picks (its forward over the common prefix)
must be within two bf16 steps of each other: a wrong position, mask or K/V is off by whole units.
"""

from __future__ import annotations

import pytest
import torch

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.model import load_model

pytestmark = pytest.mark.model
NEW = 64
SHARED = ("You are a helpful assistant. Answer briefly and precisely, in plain English, and never use lists. "
          "The user asks about the history of computing.")
TAILS = ["Who built the first compiler?", "What was ENIAC?", "Tell me about punched cards in the 1890 census.",
         "Why did transistors replace vacuum tubes?"]


def _bf16_step(x: float) -> float:
    """The spacing of bf16 numbers at magnitude ``x`` (8 bits of mantissa)."""
    return 2.0 ** (int(torch.tensor(abs(x)).log2().floor()) - 7)


def _hf_greedy(hf, ids: list[int]) -> list[int]:
    from transformers import GenerationConfig

    config = GenerationConfig(max_new_tokens=NEW, do_sample=False, pad_token_id=0)
    config.eos_token_id = []
    with torch.inference_mode():
        gen = hf.model.generate(torch.tensor([ids]), generation_config=config,
                                attention_mask=torch.ones(1, len(ids), dtype=torch.long))
    return gen[0, len(ids):].tolist()


def test_bf16_greedy_equals_hf_until_a_near_tie():
    lm = load_model(dtype="bfloat16")
    hf = load_model(backend="transformers", dtype="bfloat16")
    assert lm.model.lm_head.weight.dtype == torch.bfloat16 and hf.model.dtype == torch.bfloat16
    prompts = [lm.tokenizer(SHARED + " " + t, add_special_tokens=False).input_ids for t in TAILS]
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=32 << 20))
    assert engine.memory.k[0].dtype == torch.bfloat16
    for i, ids in enumerate(prompts):
        engine.add_request(f"p{i}", ids, SamplingParams(max_tokens=NEW, ignore_eos=True))
    done = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out.token_ids
    for i, ids in enumerate(prompts):
        ours, ref = done[f"p{i}"], _hf_greedy(hf, ids)
        part = next((j for j, (a, b) in enumerate(zip(ours, ref, strict=True)) if a != b), None)
        if part is None:
            continue
        with torch.inference_mode():
            logits = hf.model(input_ids=torch.tensor([ids + ours[:part]])).logits[0, -1].float()
        a, b = logits[ref[part]].item(), logits[ours[part]].item()
        assert abs(a - b) <= 2 * _bf16_step(max(a, b)), (i, part, a, b)
        assert logits.max().item() - max(a, b) <= 2 * _bf16_step(max(a, b))  # both picks are at the top
