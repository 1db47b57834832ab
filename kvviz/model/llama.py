"""A Llama decoder in plain PyTorch, for loading the embedded model without importing transformers.

The computation is the Llama architecture as transformers implements it (RMSNorm in float32, rotary
embeddings computed in float32 and cast to the compute dtype, grouped-query attention with scale
head_dim^-1/2, SiLU-gated MLP, tied LM head); parameter names equal transformers' so the same
safetensors file loads into either. Only plain configs qualify (``native_llama_supported``); any
other model goes through transformers. Tests check both give the same logits and K/V.

The decoder loop exists once, here (``NativeLlamaForCausalLM.forward_tokens``): tokens are rows
``[T, hidden]``; each layer hands its new Q/K/V to a ``KVAttention``, which stores the K/V where they live
and returns the attention output. The model's ``forward`` (prefill pages, tests) uses a ``CacheAttention``
over a ``KVCache``; the engine passes its paged attention (``kvviz.engine.attention``) and its packed
projections. Invariant: a ``KVCache`` grows into new tensors, so tensors handed to it (a reused prefix)
are never modified; its K are post-rotary, exactly what an engine stores.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from kvviz.model.kv_cache import CacheAttention, KVAttention, KVCache, KVCacheLayer, causal_mask

_SUPPORTED_MODEL_TYPES = ("llama",)


@dataclass(frozen=True)
class LlamaConfig:
    """The fields of a Llama ``config.json`` the forward pass uses (names as in transformers)."""

    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    rms_norm_eps: float
    rope_theta: float
    max_position_embeddings: int | None = None
    tie_word_embeddings: bool = True
    model_type: str = "llama"
    architectures: list[str] = field(default_factory=lambda: ["LlamaForCausalLM"])

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> LlamaConfig:
        heads = int(raw["num_attention_heads"])
        hidden = int(raw["hidden_size"])
        return cls(
            vocab_size=int(raw["vocab_size"]),
            hidden_size=hidden,
            intermediate_size=int(raw["intermediate_size"]),
            num_hidden_layers=int(raw["num_hidden_layers"]),
            num_attention_heads=heads,
            num_key_value_heads=int(raw.get("num_key_value_heads") or heads),
            head_dim=int(raw.get("head_dim") or hidden // heads),
            rms_norm_eps=float(raw.get("rms_norm_eps", 1e-6)),
            rope_theta=float(_rope(raw).get("rope_theta", raw.get("rope_theta", 10000.0))),
            max_position_embeddings=raw.get("max_position_embeddings"),
            tie_word_embeddings=bool(raw.get("tie_word_embeddings", True)),
        )


def _rope(raw: dict[str, Any]) -> dict[str, Any]:
    """The rotary settings of a config (``rope_parameters`` in new configs, ``rope_scaling`` in old)."""
    return dict(raw.get("rope_parameters") or raw.get("rope_scaling") or {})


def native_llama_supported(raw: dict[str, Any]) -> str | None:
    """None when this ``config.json`` is a plain Llama the native decoder computes exactly; else why not."""
    checks = [
        (raw.get("model_type") in _SUPPORTED_MODEL_TYPES, f"model_type {raw.get('model_type')!r}"),
        (_rope(raw).get("rope_type", "default") == "default" and "factor" not in _rope(raw), "scaled rotary embeddings"),
        (not raw.get("attention_bias") and not raw.get("mlp_bias"), "bias terms"),
        (raw.get("hidden_act", "silu") == "silu", f"activation {raw.get('hidden_act')!r}"),
        (int(raw.get("pretraining_tp", 1) or 1) == 1, "pretraining_tp > 1"),
        (raw.get("tie_word_embeddings", True) is not False, "an untied LM head"),
    ]
    for ok, reason in checks:
        if not ok:
            return reason
    return None


def _unset(*shape: int) -> nn.Parameter:
    """A parameter with a shape and no storage (meta device), filled by ``load_state_dict(assign=True)``;
    no initialisation work, which would cost more than reading the weights."""
    return nn.Parameter(torch.empty(*shape, device="meta"), requires_grad=False)


class Linear(nn.Module):
    """y = x W^T (no bias), W ``[out, in]`` as in ``nn.Linear``."""

    def __init__(self, in_features: int, out_features: int) -> None:
        super().__init__()
        self.weight = _unset(out_features, in_features)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class Embedding(nn.Module):
    """Row lookup in a ``[vocab, hidden]`` table."""

    def __init__(self, vocab_size: int, dim: int) -> None:
        super().__init__()
        self.weight = _unset(vocab_size, dim)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return F.embedding(ids, self.weight)


class RMSNorm(nn.Module):
    """x / sqrt(mean(x^2) + eps) * weight, normalised in float32 and cast back before the weight."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.weight = _unset(dim)
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``[..., dim]`` -> same shape (transformers' order of operations: the same numbers)."""
        dtype = x.dtype
        h = x.to(torch.float32)
        h = h * h.pow(2).mean(-1, keepdim=True).add_(self.eps).rsqrt_()
        return self.weight * h.to(dtype)


class RotaryEmbedding(nn.Module):
    """cos/sin tables for positions, computed in float32 and returned in the compute dtype."""

    def __init__(self, head_dim: int, theta: float) -> None:
        super().__init__()
        exponent = torch.arange(0, head_dim, 2, dtype=torch.int64).to(torch.float32) / head_dim
        self.register_buffer("inv_freq", 1.0 / (theta**exponent), persistent=False)

    def forward(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """``positions`` ``[T]`` -> cos, sin ``[T, head_dim]`` (each half of a row repeats the frequencies)."""
        freqs = positions.to(torch.float32)[:, None] * self.inv_freq.to(positions.device)[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(dtype), emb.sin().to(dtype)

    def tables(self, positions: torch.Tensor, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and the signed sin ``[T, 1, head_dim]`` for ``apply_rotary``: the sin's first half negated,
        so rotate_half(x) * sin = roll(x, half) * signed sin (negation is exact: the same numbers)."""
        cos, sin = self.forward(positions, dtype)
        half = sin.shape[-1] // 2
        signed = torch.cat((-sin[:, :half], sin[:, half:]), dim=-1)
        return cos[:, None, :], signed[:, None, :]


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """Rotary positions on ``x`` ``[T, n, head_dim]`` (``cos``/``signed_sin`` ``[T, 1, head_dim]``):
    x cos + rotate_half(x) sin, rotate_half as one roll."""
    return x * cos + torch.roll(x, x.shape[-1] // 2, dims=-1) * signed_sin


class Fused:
    """One weight ``[sum(outs), in]`` whose row blocks are the weights of several projections of the same
    input (vLLM's QKVParallelLinear, MergedColumnParallelLinear): one GEMM instead of several.

    Invariant: it is used only while each projection's weight is still its view (same storage, same
    place); a moved or replaced weight falls back to the separate projections."""

    def __init__(self, parts: list[Linear]) -> None:
        self.weight = torch.cat([p.weight for p in parts])  # [sum(outs), in]
        self.sizes = [p.weight.shape[0] for p in parts]
        start = 0
        for p, size in zip(parts, self.sizes, strict=True):
            p.weight = nn.Parameter(self.weight[start:start + size], requires_grad=False)  # a view: no copy
            start += size
        self.parts = parts
        self._ptrs = [p.weight.data_ptr() for p in parts]

    def applies(self) -> bool:
        return [p.weight.data_ptr() for p in self.parts] == self._ptrs

    def joined(self, x: torch.Tensor) -> torch.Tensor:
        """Every projection of ``x`` ``[..., in]`` side by side ``[..., sum(outs)]``: one GEMM while the views
        hold, else one by one (and joined)."""
        if self.applies():
            return F.linear(x, self.weight)
        return torch.cat([p(x) for p in self.parts], dim=-1)

    def __call__(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Each projection of ``x``, split."""
        return self.joined(x).split(self.sizes, dim=-1)


Project = Callable[[torch.Tensor], torch.Tensor]


class Projections(Protocol):
    """One layer's matrix products, ``[T, in] -> [T, out]`` each: the model's own (``OwnProjections``) or the
    engine's packed copies (``kvviz.engine.weights.LayerWeights``)."""

    qkv: Project  # [T, hidden] -> [T, (heads + 2 kv_heads) * head_dim]
    o: Project  # [T, heads * head_dim] -> [T, hidden]
    gate_up: Project  # [T, hidden] -> [T, 2 * intermediate]
    act: Project  # [T, 2 * intermediate] (gate | up) -> silu(gate) * up [T, intermediate]
    down: Project  # [T, intermediate] -> [T, hidden]
    norm: Callable[[torch.Tensor, RMSNorm], torch.Tensor]  # [T, hidden] through that RMSNorm's weight and eps
    rotate: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]  # apply_rotary's contract


def silu_and_mul(gate_up: torch.Tensor) -> torch.Tensor:
    """``[..., 2I]`` (gate | up) -> silu(gate) * up ``[..., I]``, as transformers' LlamaMLP computes it."""
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate).mul_(up)


def own_norm(x: torch.Tensor, norm: RMSNorm) -> torch.Tensor:
    """``x`` through ``norm`` itself (the module's own computation)."""
    return norm(x)


def _side_by_side(parts: list[Linear]) -> Project:
    """``x`` -> every part's projection of ``x`` side by side (no fused weight)."""
    return lambda x: torch.cat([p(x) for p in parts], dim=-1)


class OwnProjections:
    """A layer's ``Projections`` from its own weights (fused when ``fuse`` ran and still applies)."""

    def __init__(self, layer: DecoderLayer) -> None:
        a, m = layer.self_attn, layer.mlp
        self.qkv: Project = a.qkv.joined if a.qkv is not None else _side_by_side([a.q_proj, a.k_proj, a.v_proj])
        self.o: Project = a.o_proj
        self.gate_up: Project = m.gate_up.joined if m.gate_up is not None else _side_by_side([m.gate_proj, m.up_proj])
        self.act: Project = silu_and_mul
        self.down: Project = m.down_proj
        self.norm = own_norm
        self.rotate = apply_rotary


class Attention(nn.Module):
    """Grouped-query self-attention with rotary positions; K/V heads shared by groups of query heads. Its
    weights are named as transformers'; the product with them comes from a ``Projections``."""

    def __init__(self, cfg: LlamaConfig, index: int) -> None:
        super().__init__()
        self.index = index  # the layer's number: where its K/V live in a KVAttention
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = Linear(cfg.hidden_size, self.heads * self.head_dim)
        self.k_proj = Linear(cfg.hidden_size, self.kv_heads * self.head_dim)
        self.v_proj = Linear(cfg.hidden_size, self.kv_heads * self.head_dim)
        self.o_proj = Linear(self.heads * self.head_dim, cfg.hidden_size)
        self.qkv: Fused | None = None  # set by ``fuse`` once the weights are loaded

    def fuse(self) -> None:
        self.qkv = Fused([self.q_proj, self.k_proj, self.v_proj])

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], attn: KVAttention,
                proj: Projections, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` ``[T, hidden]`` (normed) -> ``[T, hidden]``, or ``[R, hidden]`` of the rows ``rows`` only;
        the new K/V of every row go to ``attn``."""
        t, h, kvh, d = x.shape[0], self.heads, self.kv_heads, self.head_dim
        qkv = proj.qkv(x).view(t, h + 2 * kvh, d)  # [T, h + 2 kvh, d]
        qk = proj.rotate(qkv[:, :h + kvh], *rope)  # [T, h + kvh, d]: Q and K rotated at once
        o = attn.attend(self.index, qk[:, :h], qk[:, h:], qkv[:, h + kvh:], rows)  # [T or R, h, d]
        return proj.o(o.reshape(o.shape[0], h * d))


class MLP(nn.Module):
    """down(silu(gate(x)) * up(x))."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.gate_proj = Linear(cfg.hidden_size, cfg.intermediate_size)
        self.up_proj = Linear(cfg.hidden_size, cfg.intermediate_size)
        self.down_proj = Linear(cfg.intermediate_size, cfg.hidden_size)
        self.gate_up: Fused | None = None  # set by ``fuse`` once the weights are loaded

    def fuse(self) -> None:
        self.gate_up = Fused([self.gate_proj, self.up_proj])

    def forward(self, x: torch.Tensor, proj: Projections) -> torch.Tensor:
        """``x`` ``[T, hidden]`` -> ``[T, hidden]``."""
        return proj.down(proj.act(proj.gate_up(x)))  # [T, 2 intermediate] -> [T, intermediate] -> [T, hidden]


class DecoderLayer(nn.Module):
    """Pre-norm block: x + attn(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, cfg: LlamaConfig, index: int = 0) -> None:
        super().__init__()
        self.self_attn = Attention(cfg, index)
        self.mlp = MLP(cfg)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, x: torch.Tensor, rope: tuple[torch.Tensor, torch.Tensor], attn: KVAttention,
                proj: Projections | None = None, rows: torch.Tensor | None = None) -> torch.Tensor:
        """``x`` ``[T, hidden]`` -> ``[T, hidden]`` (a new tensor: ``x`` is not written), or ``[R, hidden]`` of
        the rows ``rows`` only: every row's K/V are still computed and stored, nothing else of the others."""
        proj = proj if proj is not None else OwnProjections(self)
        h = self.self_attn(proj.norm(x, self.input_layernorm), rope, attn, proj, rows)  # [T or R, hidden]
        x = (x if rows is None else x[rows]) + h
        return x.add_(self.mlp(proj.norm(x, self.post_attention_layernorm), proj))


class LlamaBody(nn.Module):
    """Embedding, decoder layers and the final norm (``model.*`` in transformers' parameter names)."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.embed_tokens = Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(cfg.head_dim, cfg.rope_theta)


class NativeLlamaForCausalLM(nn.Module):
    """A Llama causal LM whose call matches the subset of transformers' API kvviz uses:
    ``model(input_ids=..., past_key_values=cache, use_cache=..., logits_to_keep=k)`` returns an
    object with ``logits`` ``[batch, k or tokens, vocab]`` and ``past_key_values`` (a KVCache).
    ``forward_tokens`` is the decoder itself, for any ``KVAttention`` (the engine's paged one too)."""

    def __init__(self, cfg: LlamaConfig) -> None:
        super().__init__()
        self.config = cfg
        self.model = LlamaBody(cfg)
        self.lm_head = Linear(cfg.hidden_size, cfg.vocab_size)
        self.lm_head.weight = self.model.embed_tokens.weight  # tied, as in the checkpoint

    def fuse_projections(self) -> None:
        """Q/K/V and gate/up of every layer become one weight each (views keep transformers' names)."""
        for layer in self.model.layers:
            layer.self_attn.fuse()
            layer.mlp.fuse()

    def get_input_embeddings(self) -> Embedding:
        return self.model.embed_tokens

    def new_cache(self, data: list[tuple[torch.Tensor, torch.Tensor]] | None = None) -> KVCache:
        """An empty cache, or one holding the given per-layer (K, V) ``[1, kv_heads, P, head_dim]``."""
        return KVCache(self.config.num_hidden_layers, data)

    def forward_tokens(self, ids: torch.Tensor, positions: torch.Tensor, attn: KVAttention,
                       projections: Sequence[Projections] | None = None,
                       keep: torch.Tensor | None = None, trim_last: bool = False) -> torch.Tensor:
        """The decoder: token ``ids`` ``[T]`` at ``positions`` ``[T]`` (any number of sequences, as ``attn``
        knows them) through every layer; the final-normed hidden states ``[T, hidden]``, or of the rows
        ``keep`` ``[R]`` only. ``projections``: one per layer (default: the layers' own weights).
        ``trim_last`` (the engine): the last layer computes only the K/V of the rows not kept, as nothing reads
        their output (the kept rows' numbers may move by float rounding, as products of fewer rows sum in
        another order; without it every row is computed, as transformers does)."""
        x = self.model.embed_tokens(ids)  # [T, hidden]
        rope = self.model.rotary_emb.tables(positions, x.dtype)  # cos, signed sin [T, 1, d]
        last = len(self.model.layers) - 1 if trim_last and keep is not None else -1
        for i, layer in enumerate(self.model.layers):
            x = layer(x, rope, attn, projections[i] if projections is not None else None, keep if i == last else None)
        if keep is not None and last < 0:
            x = x[keep]  # [R, hidden]
        return self.model.norm(x)

    def forward(self, input_ids: torch.Tensor, past_key_values: KVCache | None = None, use_cache: bool = True,
                logits_to_keep: int = 0) -> SimpleNamespace:
        """``input_ids`` ``[1, n]`` after the cache's positions -> logits ``[1, n or logits_to_keep, vocab]``."""
        if input_ids.shape[0] != 1:
            raise ValueError(f"the native decoder runs one sequence per call, not {input_ids.shape[0]}")
        if use_cache and past_key_values is None:
            past_key_values = self.new_cache()
        cache = past_key_values if use_cache else None
        cfg, n, device = self.config, input_ids.shape[1], input_ids.device
        attn = CacheAttention(cache, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim, n, device)
        positions = torch.arange(attn.past, attn.past + n, device=device)  # [n]
        keep = torch.arange(n - logits_to_keep, n, device=device) if 0 < logits_to_keep < n else None
        x = self.forward_tokens(input_ids[0], positions, attn, keep=keep)  # [n or k, hidden]
        return SimpleNamespace(logits=self.lm_head(x).unsqueeze(0), past_key_values=cache)


def load_native_llama(folder: Path, dtype: torch.dtype, device: str) -> NativeLlamaForCausalLM:
    """Build the decoder from ``config.json`` and ``model.safetensors`` in ``folder``; exact parameter
    names and shapes are required (a missing, extra or misshapen tensor raises)."""
    from safetensors.torch import load_file

    raw = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    why_not = native_llama_supported(raw)
    if why_not is not None:
        raise ValueError(f"the native Llama decoder does not support {why_not}")
    cfg = LlamaConfig.from_dict(raw)
    model = NativeLlamaForCausalLM(cfg)
    weights = folder / "model.safetensors"
    if not weights.is_file():
        raise ValueError(f"the native Llama decoder needs one model.safetensors file in {folder}")
    # straight onto CUDA or the CPU; other devices (MPS) get the CPU copy moved by the caller
    target = device if device.split(":")[0] in ("cpu", "cuda") else "cpu"
    state = {k: v.to(dtype) for k, v in load_file(str(weights), device=target).items()}
    if "lm_head.weight" not in state and "model.embed_tokens.weight" in state:
        state["lm_head.weight"] = state["model.embed_tokens.weight"]
    model.load_state_dict(state, strict=True, assign=True)
    model.lm_head.weight = model.model.embed_tokens.weight
    model.model.rotary_emb.to(target)
    model.fuse_projections()
    return model


__all__ = ["Attention", "CacheAttention", "DecoderLayer", "KVAttention", "KVCache", "KVCacheLayer", "LlamaConfig",
           "NativeLlamaForCausalLM", "OwnProjections", "Projections", "apply_rotary", "causal_mask",
           "load_native_llama", "native_llama_supported"]
