"""One reader per model family: (cfg, family, name, notes) -> ModelShape, with the family's field names,
defaults and per-layer pattern (sliding windows, hybrid state layers, MLA).

Invariant: a reader appends a ``ConfigNote`` for every default or reinterpretation it makes, and raises
only ``ConfigError`` (or a kvsize error from ``ModelShape``, which the caller wraps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvviz.analysis.sizes.hf_config.codes import ConfigError, ConfigNote
from kvviz.analysis.sizes.hf_config.fields import (
    Notes,
    base_counts,
    bool_field,
    head_dim,
    int_field,
    kv_heads_or_heads,
    layer_kinds_from_types,
    present,
    window,
)
from kvviz.analysis.sizes.kvsize import MAX_HEAD_DIM, MAX_HEADS, MAX_LAYERS, MLA, LayerKind, ModelShape

Reader = Callable[[dict[str, Any], str, str, Notes], ModelShape]


def _shape(name: str, layers: int, heads: int, kv: int, hd: int, hidden: int | None,
           kinds: tuple[LayerKind, ...] | None, win: int | None, mla: MLA | None = None) -> ModelShape:
    if kinds is not None and LayerKind.SLIDING not in kinds:
        win = None
    if kinds is not None and LayerKind.SLIDING in kinds and win is None:
        raise ConfigError("sliding_no_window")
    return ModelShape(name=name, num_layers=layers, num_heads=heads, num_kv_heads=kv, head_dim=hd,
                      d_model=hidden, layer_kinds=kinds, sliding_window=win, mla=mla)


def read_generic(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """llama, mistral, mixtral, phi3, gemma and the fallback: sliding_window (unless
    use_sliding_window is false) applies to every layer; explicit layer_types win."""
    layers, heads, hidden = base_counts(cfg)
    kv = kv_heads_or_heads(cfg, heads, notes)
    hd = head_dim(cfg, family, heads, hidden, notes)
    win = window(cfg)
    kinds = layer_kinds_from_types(cfg, layers)
    if kinds is None and win is not None and bool_field(cfg, "use_sliding_window", True):
        kinds = (LayerKind.SLIDING,) * layers
        notes.append(ConfigNote("window_every_layer", {"window": win}))
    return _shape(name, layers, heads, kv, hd, hidden, kinds, win)


def _read_qwen2(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """qwen2/qwen3 (and MoE): sliding only when use_sliding_window is true, on layers >= max_window_layers."""
    layers, heads, hidden = base_counts(cfg)
    kv = kv_heads_or_heads(cfg, heads, notes)
    hd = head_dim(cfg, family, heads, hidden, notes)
    use = bool_field(cfg, "use_sliding_window", False)
    win = window(cfg) if use else None
    kinds = layer_kinds_from_types(cfg, layers)
    if not use and kinds is not None and LayerKind.SLIDING in kinds:
        notes.append(ConfigNote("qwen_sliding_as_full"))
        kinds = tuple(LayerKind.FULL if k == LayerKind.SLIDING else k for k in kinds)
    if kinds is None and use and win is not None:
        first = int_field(cfg, ("max_window_layers",), low=0, high=MAX_LAYERS)
        first = 28 if first is None else first
        kinds = tuple(LayerKind.SLIDING if i >= first else LayerKind.FULL for i in range(layers))
        notes.append(ConfigNote("qwen_sliding_layers", {"first": first, "last": layers - 1, "window": win}))
    elif not use and present(cfg, "sliding_window"):
        notes.append(ConfigNote("qwen_window_unused"))
    return _shape(name, layers, heads, kv, hd, hidden, kinds, win)


def _read_gemma_alternating(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """gemma2 (1 sliding : 1 global) and gemma3 (sliding_window_pattern - 1 sliding : 1 global)."""
    layers, heads, hidden = base_counts(cfg)
    kv = kv_heads_or_heads(cfg, heads, notes)
    hd = head_dim(cfg, family, heads, hidden, notes)
    win = window(cfg)
    if win is None:
        win = 4096
        notes.append(ConfigNote("default_window", {"family": family, "window": win}))
    kinds = layer_kinds_from_types(cfg, layers)
    if kinds is None:
        if family == "gemma2":
            pattern = 2
        else:
            pattern = int_field(cfg, ("sliding_window_pattern",), high=MAX_LAYERS) or 6
        kinds = tuple(LayerKind.FULL if (i + 1) % pattern == 0 else LayerKind.SLIDING for i in range(layers))
        notes.append(ConfigNote("alternating_pattern", {"every": pattern, "window": win}))
    return _shape(name, layers, heads, kv, hd, hidden, kinds, win)


def _read_qwen_hybrid(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """qwen3_next / qwen3_5(_moe): Gated DeltaNet layers with full attention every full_attention_interval."""
    layers, heads, hidden = base_counts(cfg)
    kv = kv_heads_or_heads(cfg, heads, notes)
    hd = head_dim(cfg, family, heads, hidden, notes)
    kinds = layer_kinds_from_types(cfg, layers)
    if kinds is None:
        interval = int_field(cfg, ("full_attention_interval",), high=MAX_LAYERS)
        if interval is None:
            interval = 4
            notes.append(ConfigNote("default_interval", {"interval": interval}))
        kinds = tuple(LayerKind.FULL if (i + 1) % interval == 0 else LayerKind.STATE for i in range(layers))
        notes.append(ConfigNote("interval_pattern", {"every": interval}))
    n_state = sum(1 for k in kinds if k == LayerKind.STATE)
    if n_state:
        notes.append(ConfigNote("state_layers", {"state": n_state, "layers": layers}))
    return _shape(name, layers, heads, kv, hd, hidden, kinds, window(cfg))


def _read_falcon(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """falcon: new_decoder_architecture -> num_kv_heads groups; else multi_query (default true) -> 1 KV head."""
    layers, heads, hidden = base_counts(cfg)
    if hidden is None:
        raise ConfigError("missing_field", what="hidden", keys="hidden_size / n_embed")
    new_arch = bool_field(cfg, "new_decoder_architecture", False)
    multi_query = bool_field(cfg, "multi_query", True)
    declared = int_field(cfg, ("num_kv_heads", "n_head_kv"), high=MAX_HEADS)
    if new_arch:
        kv = declared if declared is not None else heads
        notes.append(ConfigNote("falcon_groups", {"kv": kv}))
    elif multi_query:
        kv = 1
        if declared not in (None, 1):
            notes.append(ConfigNote("falcon_mq_ignored", {"declared": declared}))
        else:
            notes.append(ConfigNote("falcon_mq"))
    else:
        kv = declared if declared is not None else heads
    hd = head_dim(cfg, family, heads, hidden, notes)
    return _shape(name, layers, heads, kv, hd, hidden, None, None)


def _read_gpt2_like(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """gpt2, gpt_neox (MHA) and gpt_bigcode (multi_query, default true -> 1 KV head)."""
    layers, heads, hidden = base_counts(cfg)
    if family == "gpt_bigcode":
        kv = 1 if bool_field(cfg, "multi_query", True) else heads
        notes.append(ConfigNote("bigcode_mq" if kv == 1 else "bigcode_mha"))
    else:
        kv = heads
    hd = head_dim(cfg, family, heads, hidden, notes)
    return _shape(name, layers, heads, kv, hd, hidden, None, None)


def _read_jamba(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """jamba: attention on layers where i % attn_layer_period == attn_layer_offset, Mamba elsewhere."""
    layers, heads, hidden = base_counts(cfg)
    kv = kv_heads_or_heads(cfg, heads, notes)
    hd = head_dim(cfg, family, heads, hidden, notes)
    kinds = layer_kinds_from_types(cfg, layers)
    if kinds is None:
        period = int_field(cfg, ("attn_layer_period",), high=MAX_LAYERS) or 8
        offset = int_field(cfg, ("attn_layer_offset",), low=0, high=MAX_LAYERS)
        offset = 4 if offset is None else offset
        kinds = tuple(LayerKind.FULL if i % period == offset else LayerKind.STATE for i in range(layers))
        notes.append(ConfigNote("jamba_pattern", {"period": period, "offset": offset}))
    return _shape(name, layers, heads, kv, hd, hidden, kinds, window(cfg))


def _read_deepseek(cfg: dict[str, Any], family: str, name: str, notes: Notes) -> ModelShape:
    """deepseek_v2/v3 (and Kimi-K2): MLA caches kv_lora_rank + qk_rope_head_dim values per layer per token."""
    layers, heads, hidden = base_counts(cfg)
    if cfg.get("kv_lora_rank", 0) is None:
        notes.append(ConfigNote("mla_null_rank"))
        return read_generic(cfg, family, name, notes)
    rank = int_field(cfg, ("kv_lora_rank",), high=MAX_HEAD_DIM)
    rope = int_field(cfg, ("qk_rope_head_dim",), low=0, high=MAX_HEAD_DIM)
    if rank is None:
        rank = 512
        notes.append(ConfigNote("mla_default_rank", {"value": rank}))
    if rope is None:
        rope = 64
        notes.append(ConfigNote("mla_default_rope", {"value": rope}))
    nope = int_field(cfg, ("qk_nope_head_dim",), low=0, high=MAX_HEAD_DIM) or 128
    notes.append(ConfigNote("mla_latent", {"rank": rank, "rope": rope, "values": rank + rope}))
    return _shape(name, layers, heads, 1, nope + rope, hidden, None, None, MLA(rank, rope))


READERS: dict[str, Reader] = {
    "llama": read_generic,
    "mistral": read_generic,
    "mixtral": read_generic,
    "phi3": read_generic,
    "gemma": read_generic,
    "qwen2": _read_qwen2,
    "qwen2_moe": _read_qwen2,
    "qwen3": _read_qwen2,
    "qwen3_moe": _read_qwen2,
    "qwen3_next": _read_qwen_hybrid,
    "qwen3_5": _read_qwen_hybrid,
    "qwen3_5_moe": _read_qwen_hybrid,
    "gemma2": _read_gemma_alternating,
    "gemma3": _read_gemma_alternating,
    "falcon": _read_falcon,
    "gpt2": _read_gpt2_like,
    "gpt_neox": _read_gpt2_like,
    "gpt_bigcode": _read_gpt2_like,
    "jamba": _read_jamba,
    "deepseek_v2": _read_deepseek,
    "deepseek_v3": _read_deepseek,
}
"""The reader of each known family; any other model_type goes to ``read_generic``."""
