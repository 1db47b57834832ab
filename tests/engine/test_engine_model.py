"""The engine on the embedded SmolLM2 (fp32 CPU) against transformers' ``generate`` on the same weights:
greedy tokens equal for one request and for 8 concurrent ones with shared prefixes; every prefill chunk's
logits equal an unchunked forward; a cached block's K/V equal a fresh prefill of its prefix."""

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
         "Why did transistors replace vacuum tubes?", "What is a mainframe?", "Describe the Apollo guidance computer.",
         "Who was Ada Lovelace?", "What does a cache do in a CPU?"]


@pytest.fixture(scope="module")
def lm():
    return load_model()


@pytest.fixture(scope="module")
def prompts(lm):
    tok = lm.tokenizer
    out = [tok(SHARED + " " + t, add_special_tokens=False).input_ids for t in TAILS]
    out[3] = out[3][:23]  # a short one inside the shared prefix
    return out


@pytest.fixture(scope="module")
def hf_greedy(prompts):
    """transformers' generate, greedy, 64 new tokens (no early stop), per prompt; computed once."""
    from transformers import GenerationConfig

    hf = load_model(backend="transformers")
    config = GenerationConfig(max_new_tokens=NEW, min_new_tokens=0, do_sample=False, pad_token_id=0)
    config.eos_token_id = []  # generate the full 64 tokens, as the engine with ignore_eos does
    out = []
    with torch.inference_mode():
        for ids in prompts:
            gen = hf.model.generate(torch.tensor([ids]), generation_config=config,
                                    attention_mask=torch.ones(1, len(ids), dtype=torch.long))
            out.append(gen[0, len(ids):].tolist())
    return out


def _run(engine: LLMEngine, prompts: list[list[int]], n: int = NEW) -> list[list[int]]:
    for i, ids in enumerate(prompts):
        engine.add_request(f"p{i}", ids, SamplingParams(max_tokens=n, ignore_eos=True))
    done = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out
        engine.pool.check_invariants()
    return [done[f"p{i}"].token_ids for i in range(len(prompts))]


def test_greedy_single_equals_hf_generate(lm, prompts, hf_greedy):
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=32 << 20))
    assert len(hf_greedy[0]) == NEW
    assert _run(engine, prompts[:1]) == hf_greedy[:1]


def test_greedy_8_concurrent_shared_prefix_equals_hf_generate(lm, prompts, hf_greedy):
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=64 << 20, max_num_batched_tokens=128))
    assert _run(engine, prompts) == hf_greedy
    stats = engine.stats()
    assert stats.prefix_cache_hits > 0  # the shared prefix was computed once and reused through block tables
    assert stats.num_preemptions == 0


def test_prefill_chunks_match_unchunked_forward_and_cached_block_kv(lm, prompts):
    engine = LLMEngine(lm, EngineConfig(kv_cache_bytes=16 << 20, max_num_batched_tokens=16, block_size=16))
    engine.chunk_logits = []
    ids = prompts[0]
    engine.add_request("c", ids, SamplingParams(max_tokens=1))
    while engine.has_unfinished_requests():
        engine.step()
    chunks = [(start, logits) for rid, start, logits in engine.chunk_logits if rid == "c"]
    assert len(chunks) >= 3 and all(lg.shape[0] <= 16 for _, lg in chunks)
    with torch.inference_mode():
        ref = lm.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]
    # the engine multiplies through oneDNN's packed weights, the reference through MKL: fp32 sums in another
    # order, about 3e-6 of the logits' range (1.1e-4 of 34); a wrong position or mask is off by whole units
    tol = 1e-5 * ref.abs().max().item()
    for start, logits in chunks:
        assert (logits - ref[start:start + logits.shape[0]]).abs().max().item() <= tol
    # the cached first block holds what a fresh prefill of its 16 tokens computes (post-rotary K, V)
    block = engine.pool.get_cached_block(engine.manager.request_block_hashes(ids)[0])
    k, v, tokens = engine.kv_of_block(block.block_id)
    assert tokens == ids[:16]
    with torch.inference_mode():
        cache = lm.model(input_ids=torch.tensor([ids[:16]]), use_cache=True).past_key_values
    for layer in range(lm.info.num_layers):
        fresh_k = cache.layers[layer].keys[0].transpose(0, 1)  # [16, kv_heads, d]
        fresh_v = cache.layers[layer].values[0].transpose(0, 1)
        assert (k[layer] - fresh_k).abs().max().item() <= 1e-4
        assert (v[layer] - fresh_v).abs().max().item() <= 1e-4
