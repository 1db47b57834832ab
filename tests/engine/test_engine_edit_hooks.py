"""The two engine hooks the Edit page reads (fast lane, tiny Llama): ``SamplingParams.return_logits`` hands
back the logits the new token was sampled from, and ``EngineConfig.hash_seed`` is the NONE_HASH seed of the
engine's block hashes."""

from __future__ import annotations

import torch
from tiny_llm import reference_logits, tiny_lm

from kvviz.engine import EngineConfig, LLMEngine, SamplingParams
from kvviz.mirror.hashing import hash_block_chain, init_none_hash

BS = 4
TOKEN_BYTES = 2 * 2 * 2 * 8 * 4


def run(engine: LLMEngine, rid: str, ids: list[int], **kw):
    engine.add_request(rid, ids, SamplingParams(max_tokens=1, **kw))
    outs = []
    while engine.has_unfinished_requests():
        outs.extend(o for o in engine.step() if o.request_id == rid)
    return outs[-1]


def test_return_logits_are_the_last_prompt_tokens_logits_and_off_by_default():
    lm = tiny_lm()
    engine = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=32 * BS * TOKEN_BYTES))
    ids = [3, 9, 4, 1, 7, 7, 2, 8, 5, 6]
    plain = run(engine, "plain", ids)
    assert plain.logits is None
    out = run(engine, "with", ids, return_logits=True)  # 8 of its tokens come from the cache
    assert out.num_cached_tokens == 8
    assert out.logits is not None and out.logits.dtype == torch.float32
    ref = reference_logits(lm, ids)[-1].float()
    assert torch.allclose(out.logits, ref, atol=1e-4)
    assert int(torch.argmax(out.logits)) == out.token_ids[0]


def test_hash_seed_sets_the_none_hash_of_the_engines_chain():
    lm = tiny_lm()
    seeded = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=16 * BS * TOKEN_BYTES, hash_seed="42"))
    default = LLMEngine(lm, EngineConfig(block_size=BS, kv_cache_bytes=16 * BS * TOKEN_BYTES))
    ids = [1, 2, 3, 4, 5, 6, 7, 8, 9]
    fn = seeded.manager.hash_fn
    assert seeded.manager.request_block_hashes(ids) == hash_block_chain(ids, BS, fn, init_none_hash(fn, "42"))
    assert seeded.manager.request_block_hashes(ids) != default.manager.request_block_hashes(ids)
