"""A tiny random Llama on the native decoder, wrapped as a LoadedModel: the engine's fast-lane tests run
the real engine code on it in milliseconds (no weights read, no transformers import)."""

from __future__ import annotations

import torch

from kvviz.model.llama import LlamaConfig, NativeLlamaForCausalLM
from kvviz.model.loader import LoadedModel, ModelInfo

VOCAB = 61


class DigitsTokenizer:
    """Token id i decodes to ``"<i>"``; id 0 is the end of sequence."""

    eos_token_id = 0

    def decode(self, ids, skip_special_tokens=True):
        return "".join(f"<{i}>" for i in ids if not (skip_special_tokens and i == 0))


def tiny_lm(seed: int = 0, layers: int = 2, heads: int = 4, kv_heads: int = 2, head_dim: int = 8,
            vocab: int = VOCAB) -> LoadedModel:
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=heads * head_dim, intermediate_size=48,
                      num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv_heads,
                      head_dim=head_dim, rms_norm_eps=1e-5, rope_theta=10000.0, max_position_embeddings=4096)
    model = NativeLlamaForCausalLM(cfg)
    gen = torch.Generator().manual_seed(seed)
    state = {name: torch.randn(p.shape, generator=gen) * (0.5 if p.dim() > 1 else 0.1) + (1.0 if p.dim() == 1 else 0)
             for name, p in model.named_parameters()}
    state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, strict=True, assign=True)
    model.lm_head.weight = model.model.embed_tokens.weight
    model.fuse_projections()  # as load_native_llama does: the engine runs the fused Q/K/V and gate/up
    model.eval().requires_grad_(False)
    info = ModelInfo(name="tiny-llama", source="random", num_layers=layers, num_heads=heads, num_kv_heads=kv_heads,
                     head_dim=head_dim, d_model=heads * head_dim, vocab_size=vocab,
                     num_params=sum(p.numel() for p in model.parameters()), device="cpu", dtype="float32",
                     load_s=0.0, architecture="LlamaForCausalLM", max_position_embeddings=4096, backend="native")
    return LoadedModel(model=model, tokenizer=DigitsTokenizer(), info=info, source=None)


def reference_logits(lm: LoadedModel, ids: list[int]) -> torch.Tensor:
    """All-position logits of one unchunked forward of the plain decoder: ``[len(ids), vocab]``."""
    with torch.inference_mode():
        return lm.model(input_ids=torch.tensor([ids]), use_cache=False).logits[0]


def greedy_reference(lm: LoadedModel, ids: list[int], n: int) -> list[int]:
    """n greedy tokens by the plain decoder with its own (non-paged) cache."""
    out, cache = [], lm.model.new_cache()
    x = torch.tensor([ids])
    with torch.inference_mode():
        for _ in range(n):
            logits = lm.model(input_ids=x, past_key_values=cache, logits_to_keep=1).logits[0, -1]
            t = int(logits.argmax())
            out.append(t)
            x = torch.tensor([[t]])
    return out


#: the tiny model's block size and K/V bytes a token (K and V x 2 layers x 2 kv heads x head_dim 8 x fp32)
TINY_BS = 4
TINY_TOKEN_BYTES = 2 * 2 * 2 * 8 * 4


def engine_with(lm: LoadedModel, blocks: int = 64, budget: int = 64):
    """An engine over the tiny model with ``blocks`` K/V blocks of ``TINY_BS`` tokens and a ``budget`` of
    tokens a step."""
    from kvviz.engine import EngineConfig, LLMEngine

    return LLMEngine(lm, EngineConfig(block_size=TINY_BS, kv_cache_bytes=blocks * TINY_BS * TINY_TOKEN_BYTES,
                                      max_num_batched_tokens=budget))


def drain(engine) -> dict:
    """Step ``engine`` until nothing is unfinished; every finished ``RequestOutput`` by request id."""
    done = {}
    while engine.has_unfinished_requests():
        for out in engine.step():
            if out.finished:
                done[out.request_id] = out
    return done
