"""The host tier on the embedded SmolLM2 (fp32 CPU): a prompt whose prefix was evicted from the device pool but
kept in the host tier is served with those blocks copied back, not recomputed: greedy tokens equal the fully
computed run, the copied K/V equal a fresh prefill of the prefix, and cached_tokens by source says host."""

from __future__ import annotations

import pytest
import torch

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.model import load_model

pytestmark = pytest.mark.model
BS = 16
TEXT = ("You are a helpful assistant. Answer briefly and precisely, in plain English, and never use lists. "
        "The user asks about the history of computing, the first compilers, punched cards and mainframes.")
OTHERS = ("Tell me a long story about a lighthouse keeper who collects shells on a cold and windy northern coast.",
          "List every planet of the solar system with one sentence about the weather on each of them, please.")


@pytest.fixture(scope="module")
def lm():
    return load_model()


def _run(engine: LLMEngine, rid: str, ids: list[int], n: int = 16):
    engine.add_request(rid, ids, SamplingParams(max_tokens=n, ignore_eos=True))
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                return out
    raise AssertionError("no output")


def test_a_host_hit_is_a_copy_equal_to_a_fresh_prefill(lm):
    info = lm.info
    block_bytes = 2 * info.num_layers * info.num_kv_heads * info.head_dim * info.element_size * BS
    ids = lm.tokenizer(TEXT, add_special_tokens=False).input_ids
    num_full = (len(ids) - 1) // BS
    assert num_full >= 2
    device_blocks = num_full + 3  # one other prompt's blocks evict the first prompt's
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=(device_blocks + 1) * block_bytes,
                                        kv_offloading_size=4 * device_blocks * block_bytes / (1 << 30)))
    first = _run(engine, "a", ids)
    for i, text in enumerate(OTHERS):
        _run(engine, f"o{i}", lm.tokenizer(text, add_special_tokens=False).input_ids[:device_blocks * BS - 17])
    hashes = engine.manager.request_block_hashes(ids)[:num_full]
    assert not any(engine.pool.get_cached_block(h) for h in hashes), "the prefix is still on the device"
    again = _run(engine, "a2", ids)
    assert again.token_ids == first.token_ids
    assert again.cached_tokens_by_source == {"device": 0, "host": num_full * BS}
    step = next(s for s in engine.steps if any(i.request_id == "a2" for i in s.items))
    assert step.items[0].start == num_full * BS  # only the tail after the copied blocks is computed
    fresh = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=(device_blocks + 1) * block_bytes))
    _run(fresh, "f", ids, n=1)
    with torch.inference_mode():
        plain = lm.model(input_ids=torch.tensor([ids[:num_full * BS]]), use_cache=True).past_key_values
    for j, h in enumerate(hashes):
        k, v, tokens = engine.kv_of_block(engine.pool.get_cached_block(h).block_id)
        fk, fv, _ = fresh.kv_of_block(fresh.pool.get_cached_block(h).block_id)
        assert tokens == ids[j * BS:(j + 1) * BS]
        assert (k - fk).abs().max().item() <= 1e-5 and (v - fv).abs().max().item() <= 1e-5
        for layer in range(info.num_layers):  # and the plain decoder (MKL vs oneDNN sums: 1e-4, as elsewhere)
            pk = plain.layers[layer].keys[0, :, j * BS:(j + 1) * BS].transpose(0, 1)
            assert (k[layer] - pk).abs().max().item() <= 1e-4
    assert engine.stats().prefix_cache_hits_host == num_full * BS
