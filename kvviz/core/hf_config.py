"""Read a Hugging Face ``config.json`` into a ``ModelShape``: layers, heads, KV heads, head_dim,
per-layer kinds, sliding window, MLA.

Knows the field names and defaults of: llama, mistral, mixtral, qwen2(_moe), qwen3(_moe), qwen3_next,
qwen3_5(_moe) (nested ``text_config``), gemma2, gemma3 (nested ``text_config``), phi3, falcon
(``multi_query`` / ``new_decoder_architecture``), gpt2, gpt_neox, gpt_bigcode, jamba, deepseek_v2,
deepseek_v3 (MLA). Any other ``model_type`` falls back to the common field names and says so.

Invariant: the result either is a valid shape with notes on every default or fallback used, or a
``ConfigError`` whose message is one line a person can act on. Nothing here raises anything else.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kvviz.core.jsonio import parse_json
from kvviz.core.kvsize import (
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_LAYERS,
    MLA,
    KVSizeError,
    LayerKind,
    ModelShape,
    check_count,
    normalize_dtype,
)

MAX_CONFIG_BYTES = 1 << 20
"""Largest config accepted (1 MiB); real config.json files are a few KiB."""


class ConfigError(KVSizeError):
    """A config.json that cannot be read as a model; the message is one line."""


KNOWN_FAMILIES: tuple[str, ...] = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "qwen3_5", "qwen3_5_moe", "gemma", "gemma2", "gemma3", "phi3", "falcon", "gpt2", "gpt_neox",
    "gpt_bigcode", "jamba", "deepseek_v2", "deepseek_v3",
)

_NESTED_KEYS = ("text_config", "llm_config", "language_config")

_LAYER_TYPE_WORDS: dict[str, LayerKind] = {
    "full_attention": LayerKind.FULL, "attention": LayerKind.FULL, "full": LayerKind.FULL,
    "global": LayerKind.FULL, "global_attention": LayerKind.FULL, "self_attention": LayerKind.FULL,
    "sliding_attention": LayerKind.SLIDING, "sliding_window": LayerKind.SLIDING,
    "sliding": LayerKind.SLIDING, "local": LayerKind.SLIDING, "local_attention": LayerKind.SLIDING,
    "linear_attention": LayerKind.STATE, "mamba": LayerKind.STATE, "mamba2": LayerKind.STATE,
    "ssm": LayerKind.STATE, "gated_deltanet": LayerKind.STATE, "deltanet": LayerKind.STATE,
    "recurrent": LayerKind.STATE, "conv": LayerKind.STATE, "short_conv": LayerKind.STATE,
    "rwkv": LayerKind.STATE, "linear": LayerKind.STATE,
}

# head_dim defaults of config classes that omit it from config.json.
_HEAD_DIM_DEFAULT = {"gemma": 256, "gemma2": 256, "gemma3": 256, "qwen3_next": 256, "qwen3_5": 256, "qwen3_5_moe": 256}


@dataclass(frozen=True)
class ParsedConfig:
    """A config.json read as a model shape, with what was assumed along the way."""

    shape: ModelShape
    model_type: str
    """The ``model_type`` found (of the nested text config when there is one); "" if absent."""
    family: str
    """The reader used: a known family name, or ``generic`` for the fallback."""
    notes: tuple[str, ...]
    """One line per default, fallback or nesting that affected the result."""
    config_dtype: str | None
    """The weights' dtype the config declares (``torch_dtype`` / ``dtype``), normalised, if any."""


# ---------------------------------------------------------------------------------------------
# Entry points
# ---------------------------------------------------------------------------------------------


def parse_config_text(text: str | bytes, name: str = "config.json") -> ParsedConfig:
    """Parse pasted or uploaded config.json content (str or bytes)."""
    if isinstance(text, bytes):
        if len(text) > MAX_CONFIG_BYTES:
            raise ConfigError(_too_big(len(text)))
        if b"\x00" in text[:4096]:
            raise ConfigError(f"{name} looks binary, not a JSON text file")
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise ConfigError(f"{name} is not UTF-8 text (a binary file?)") from None
    if not isinstance(text, str):
        raise ConfigError(f"{name}: expected text, got {type(text).__name__}")
    size = len(text.encode("utf-8", errors="replace"))
    if size > MAX_CONFIG_BYTES:
        raise ConfigError(_too_big(size))
    if "\x00" in text:
        raise ConfigError(f"{name} looks binary, not a JSON text file")
    if not text.strip():
        raise ConfigError(f"{name} is empty; paste the contents of a config.json")
    return parse_config(parse_json(text, name, ConfigError), name)


def load_config_file(path: str | os.PathLike[str], name: str | None = None) -> ParsedConfig:
    """Read a config.json from disk; files over 1 MiB are refused before they are read."""
    p = Path(path)
    label = name or p.name
    try:
        size = p.stat().st_size
        if p.is_dir():
            raise ConfigError(f"{label}: is a directory, not a config.json")
        if not p.is_file():
            raise ConfigError(f"{label}: not a regular file")
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(_too_big(size))
        with p.open("rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{label}: no such file") from None
    except PermissionError:
        raise ConfigError(f"{label}: permission denied") from None
    except IsADirectoryError:
        raise ConfigError(f"{label}: is a directory, not a config.json") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read ({exc.strerror or type(exc).__name__})") from None
    return parse_config_text(raw, label)


def parse_config(data: Any, name: str = "config.json") -> ParsedConfig:
    """Read an already-decoded config dict."""
    if not isinstance(data, dict):
        raise ConfigError(f"{name} must be a JSON object ({{...}}), got a JSON {_json_kind(data)}")
    notes: list[str] = []
    top_type = _str_field(data, "model_type")
    cfg = data
    for key in _NESTED_KEYS:
        inner = data.get(key)
        if isinstance(inner, dict) and inner:
            cfg = inner
            notes.append(f"read the nested {key} (a multimodal config; model_type {top_type or '?'})")
            break
    model_type = _str_field(cfg, "model_type") or top_type
    family = _family(model_type)
    display = _display_name(data, cfg, model_type, name)
    reader = _READERS.get(family)
    if reader is None:
        shown = repr(model_type) if model_type else "missing"
        notes.append(
            f"model_type {shown} is not one kvviz knows; read the common field names "
            "(num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size, head_dim)"
        )
        family = "generic"
        reader = _read_generic
    try:
        shape = reader(cfg, family, display, notes)
    except ConfigError:
        raise
    except KVSizeError as exc:
        raise ConfigError(f"{name}: {exc}") from None
    dtype = None
    for key in ("torch_dtype", "dtype"):
        raw = cfg.get(key, data.get(key))
        if isinstance(raw, str):
            try:
                dtype = normalize_dtype(raw)
            except KVSizeError:
                dtype = None
            break
    shape = replace(shape, notes=tuple(notes))
    return ParsedConfig(shape=shape, model_type=model_type, family=family, notes=tuple(notes), config_dtype=dtype)


# ---------------------------------------------------------------------------------------------
# Field helpers
# ---------------------------------------------------------------------------------------------


def _too_big(size: int) -> str:
    return f"config is {size / (1 << 20):.2f} MiB; the limit is 1 MiB (a real config.json is a few KiB)"


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _json_kind(value: Any) -> str:
    return {list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def _str_field(cfg: dict[str, Any], key: str) -> str:
    value = cfg.get(key)
    return value.strip() if isinstance(value, str) else ""


def _family(model_type: str) -> str:
    t = model_type.lower().replace("-", "_")
    if t in ("refinedwebmodel", "refinedweb", "rw"):
        return "falcon"
    if t.endswith("_text") and t[: -len("_text")] in KNOWN_FAMILIES:
        t = t[: -len("_text")]
    return t if t in KNOWN_FAMILIES else ""


def _display_name(top: dict[str, Any], cfg: dict[str, Any], model_type: str, fallback: str) -> str:
    for source in (top, cfg):
        raw = source.get("_name_or_path")
        if isinstance(raw, str) and raw.strip() and len(raw) < 200:
            return raw.strip().rstrip("/").split("/")[-1] if raw.startswith("/") else raw.strip()
    for source in (top, cfg):
        archs = source.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str) and len(archs[0]) < 200:
            return archs[0]
    return model_type or fallback


def _present(cfg: dict[str, Any], key: str) -> bool:
    return key in cfg and cfg[key] is not None


def _int(cfg: dict[str, Any], keys: tuple[str, ...], what: str, *, high: int, low: int = 1) -> int | None:
    """The first of ``keys`` that is set, checked as a count; None when none is set."""
    for key in keys:
        if _present(cfg, key):
            try:
                return check_count(f"{what} ({key})", cfg[key], low=low, high=high)
            except KVSizeError as exc:
                raise ConfigError(str(exc)) from None
    return None


def _need(cfg: dict[str, Any], keys: tuple[str, ...], what: str, *, high: int) -> int:
    value = _int(cfg, keys, what, high=high)
    if value is None:
        raise ConfigError(f"config has no {what} ({' / '.join(keys)})")
    return value


def _bool(cfg: dict[str, Any], key: str, default: bool) -> bool:
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    raise ConfigError(f"{key} must be true or false, got {value!r}")


_LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
_HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
_KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", "n_kv_heads")
_HIDDEN = ("hidden_size", "n_embd", "d_model", "model_dim", "dim")


def _head_dim(cfg: dict[str, Any], family: str, heads: int, hidden: int | None, notes: list[str]) -> int:
    explicit = _int(cfg, ("head_dim", "attention_head_dim", "kv_channels"), "head_dim", high=MAX_HEAD_DIM)
    if explicit is not None:
        if hidden is not None and explicit * heads != hidden:
            notes.append(
                f"explicit head_dim {explicit} (heads x head_dim = {explicit * heads:,} differs from "
                f"hidden_size {hidden:,}, so hidden_size / heads would be wrong here)"
            )
        return explicit
    if family in _HEAD_DIM_DEFAULT:
        value = _HEAD_DIM_DEFAULT[family]
        notes.append(f"head_dim not in config; used {family}'s default {value}")
        return value
    if hidden is None:
        raise ConfigError("config has neither head_dim nor hidden_size to derive it from")
    if hidden % heads:
        raise ConfigError(
            f"hidden_size {hidden:,} is not divisible by num_attention_heads {heads}; set head_dim explicitly"
        )
    return hidden // heads


def _kv_heads_or_heads(cfg: dict[str, Any], heads: int, notes: list[str]) -> int:
    kv = _int(cfg, _KV_HEADS, "kv heads", high=MAX_HEADS)
    if kv is None:
        notes.append("no num_key_value_heads in config: every query head has its own KV head (MHA)")
        return heads
    return kv


def _layer_kinds_from_types(cfg: dict[str, Any], layers: int) -> tuple[LayerKind, ...] | None:
    raw = cfg.get("layer_types")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ConfigError(f"layer_types must be a list, got {_json_kind(raw)}")
    if len(raw) != layers:
        raise ConfigError(f"layer_types has {len(raw)} entries but num_hidden_layers is {layers}")
    kinds = []
    for i, item in enumerate(raw):
        word = item.strip().lower() if isinstance(item, str) else None
        if word not in _LAYER_TYPE_WORDS:
            raise ConfigError(f"layer_types[{i}] is {item!r}, a layer kind kvviz does not know")
        kinds.append(_LAYER_TYPE_WORDS[word])
    return tuple(kinds)


def _window(cfg: dict[str, Any]) -> int | None:
    return _int(cfg, ("sliding_window", "sliding_window_size"), "sliding_window", high=1 << 40)


# ---------------------------------------------------------------------------------------------
# Readers: (cfg, family, name, notes) -> ModelShape
# ---------------------------------------------------------------------------------------------


def _base(cfg: dict[str, Any], family: str, notes: list[str]) -> tuple[int, int, int | None]:
    layers = _need(cfg, _LAYERS, "layer count", high=MAX_LAYERS)
    heads = _need(cfg, _HEADS, "attention head count", high=MAX_HEADS)
    hidden = _int(cfg, _HIDDEN, "hidden size", high=10_000_000)
    return layers, heads, hidden


def _shape(name: str, layers: int, heads: int, kv: int, head_dim: int, hidden: int | None,
           kinds: tuple[LayerKind, ...] | None, window: int | None, mla: MLA | None = None) -> ModelShape:
    if kinds is not None and LayerKind.SLIDING not in kinds:
        window = None
    if kinds is not None and LayerKind.SLIDING in kinds and window is None:
        raise ConfigError("layer_types has sliding-window layers but sliding_window is not set")
    return ModelShape(name=name, num_layers=layers, num_heads=heads, num_kv_heads=kv, head_dim=head_dim,
                      d_model=hidden, layer_kinds=kinds, sliding_window=window, mla=mla)


def _read_generic(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """llama, mistral, mixtral, phi3, gemma and the fallback: sliding_window (unless
    use_sliding_window is false) applies to every layer; explicit layer_types win."""
    layers, heads, hidden = _base(cfg, family, notes)
    kv = _kv_heads_or_heads(cfg, heads, notes)
    head_dim = _head_dim(cfg, family, heads, hidden, notes)
    window = _window(cfg)
    kinds = _layer_kinds_from_types(cfg, layers)
    if kinds is None and window is not None and _bool(cfg, "use_sliding_window", True):
        kinds = (LayerKind.SLIDING,) * layers
        notes.append(f"sliding_window {window:,} on every layer (each keeps at most {window:,} tokens)")
    return _shape(name, layers, heads, kv, head_dim, hidden, kinds, window)


def _read_qwen2(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """qwen2/qwen3 (and MoE): sliding only when use_sliding_window is true, on layers >= max_window_layers."""
    layers, heads, hidden = _base(cfg, family, notes)
    kv = _kv_heads_or_heads(cfg, heads, notes)
    head_dim = _head_dim(cfg, family, heads, hidden, notes)
    use = _bool(cfg, "use_sliding_window", False)
    window = _window(cfg) if use else None
    kinds = _layer_kinds_from_types(cfg, layers)
    if not use and kinds is not None and LayerKind.SLIDING in kinds:
        notes.append("use_sliding_window is false: layer_types' sliding layers are treated as full attention")
        kinds = tuple(LayerKind.FULL if k == LayerKind.SLIDING else k for k in kinds)
    if kinds is None and use and window is not None:
        first = _int(cfg, ("max_window_layers",), "max_window_layers", low=0, high=MAX_LAYERS)
        first = 28 if first is None else first
        kinds = tuple(LayerKind.SLIDING if i >= first else LayerKind.FULL for i in range(layers))
        notes.append(f"use_sliding_window: layers {first}..{layers - 1} slide over {window:,} tokens "
                     f"(max_window_layers = {first})")
    elif not use and _present(cfg, "sliding_window"):
        notes.append("sliding_window is set but use_sliding_window is false: every layer is full attention")
    return _shape(name, layers, heads, kv, head_dim, hidden, kinds, window)


def _read_gemma_alternating(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """gemma2 (1 sliding : 1 global) and gemma3 (sliding_window_pattern - 1 sliding : 1 global)."""
    layers, heads, hidden = _base(cfg, family, notes)
    kv = _kv_heads_or_heads(cfg, heads, notes)
    head_dim = _head_dim(cfg, family, heads, hidden, notes)
    window = _window(cfg)
    if window is None:
        window = 4096
        notes.append(f"sliding_window not in config; used {family}'s default 4,096")
    kinds = _layer_kinds_from_types(cfg, layers)
    if kinds is None:
        if family == "gemma2":
            pattern = 2
        else:
            pattern = _int(cfg, ("sliding_window_pattern",), "sliding_window_pattern", high=MAX_LAYERS) or 6
        kinds = tuple(LayerKind.FULL if (i + 1) % pattern == 0 else LayerKind.SLIDING for i in range(layers))
        notes.append(f"no layer_types: every {_ordinal(pattern)} layer is global, the others slide over {window:,} tokens")
    return _shape(name, layers, heads, kv, head_dim, hidden, kinds, window)


def _read_qwen_hybrid(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """qwen3_next / qwen3_5(_moe): Gated DeltaNet layers with full attention every full_attention_interval."""
    layers, heads, hidden = _base(cfg, family, notes)
    kv = _kv_heads_or_heads(cfg, heads, notes)
    head_dim = _head_dim(cfg, family, heads, hidden, notes)
    kinds = _layer_kinds_from_types(cfg, layers)
    if kinds is None:
        interval = _int(cfg, ("full_attention_interval",), "full_attention_interval", high=MAX_LAYERS)
        if interval is None:
            interval = 4
            notes.append("no layer_types or full_attention_interval; used the default interval 4")
        kinds = tuple(LayerKind.FULL if (i + 1) % interval == 0 else LayerKind.STATE for i in range(layers))
        notes.append(f"layer_types from full_attention_interval {interval}: every {_ordinal(interval)} layer is full attention")
    n_state = sum(1 for k in kinds if k == LayerKind.STATE)
    if n_state:
        notes.append(f"{n_state} of {layers} layers are Gated DeltaNet (linear attention): "
                     "a fixed-size state per request, no per-token KV")
    return _shape(name, layers, heads, kv, head_dim, hidden, kinds, _window(cfg))


def _read_falcon(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """falcon: new_decoder_architecture -> num_kv_heads groups; else multi_query (default true) -> 1 KV head."""
    layers, heads, hidden = _base(cfg, family, notes)
    if hidden is None:
        raise ConfigError("config has no hidden size (hidden_size / n_embed)")
    new_arch = _bool(cfg, "new_decoder_architecture", False)
    multi_query = _bool(cfg, "multi_query", True)
    declared = _int(cfg, ("num_kv_heads", "n_head_kv"), "kv heads", high=MAX_HEADS)
    if new_arch:
        kv = declared if declared is not None else heads
        notes.append(f"falcon new_decoder_architecture: {kv} KV head groups (num_kv_heads)")
    elif multi_query:
        kv = 1
        if declared not in (None, 1):
            notes.append(f"falcon multi_query: one shared KV head (num_kv_heads {declared} is ignored by the model)")
        else:
            notes.append("falcon multi_query: one shared KV head")
    else:
        kv = declared if declared is not None else heads
    head_dim = _head_dim(cfg, family, heads, hidden, notes)
    return _shape(name, layers, heads, kv, head_dim, hidden, None, None)


def _read_gpt2_like(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """gpt2, gpt_neox (MHA) and gpt_bigcode (multi_query, default true -> 1 KV head)."""
    layers, heads, hidden = _base(cfg, family, notes)
    if family == "gpt_bigcode":
        kv = 1 if _bool(cfg, "multi_query", True) else heads
        notes.append("gpt_bigcode multi_query: one shared KV head" if kv == 1 else "gpt_bigcode without multi_query: MHA")
    else:
        kv = heads
    head_dim = _head_dim(cfg, family, heads, hidden, notes)
    return _shape(name, layers, heads, kv, head_dim, hidden, None, None)


def _read_jamba(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """jamba: attention on layers where i % attn_layer_period == attn_layer_offset, Mamba elsewhere."""
    layers, heads, hidden = _base(cfg, family, notes)
    kv = _kv_heads_or_heads(cfg, heads, notes)
    head_dim = _head_dim(cfg, family, heads, hidden, notes)
    kinds = _layer_kinds_from_types(cfg, layers)
    if kinds is None:
        period = _int(cfg, ("attn_layer_period",), "attn_layer_period", high=MAX_LAYERS) or 8
        offset = _int(cfg, ("attn_layer_offset",), "attn_layer_offset", low=0, high=MAX_LAYERS)
        offset = 4 if offset is None else offset
        kinds = tuple(LayerKind.FULL if i % period == offset else LayerKind.STATE for i in range(layers))
        notes.append(f"jamba: attention every {period} layers (offset {offset}), Mamba (fixed-size state) elsewhere")
    return _shape(name, layers, heads, kv, head_dim, hidden, kinds, _window(cfg))


def _read_deepseek(cfg: dict[str, Any], family: str, name: str, notes: list[str]) -> ModelShape:
    """deepseek_v2/v3 (and Kimi-K2): MLA caches kv_lora_rank + qk_rope_head_dim values per layer per token."""
    layers, heads, hidden = _base(cfg, family, notes)
    if cfg.get("kv_lora_rank", 0) is None:
        notes.append("kv_lora_rank is null: no latent compression, read as ordinary attention")
        return _read_generic(cfg, family, name, notes)
    rank = _int(cfg, ("kv_lora_rank",), "kv_lora_rank", high=MAX_HEAD_DIM)
    rope = _int(cfg, ("qk_rope_head_dim",), "qk_rope_head_dim", low=0, high=MAX_HEAD_DIM)
    if rank is None:
        rank = 512
        notes.append("kv_lora_rank not in config; used the DeepSeek default 512")
    if rope is None:
        rope = 64
        notes.append("qk_rope_head_dim not in config; used the DeepSeek default 64")
    nope = _int(cfg, ("qk_nope_head_dim",), "qk_nope_head_dim", low=0, high=MAX_HEAD_DIM) or 128
    notes.append(
        f"MLA: each layer caches one latent of kv_lora_rank {rank} + qk_rope_head_dim {rope} = {rank + rope} "
        "values per token, shared by all query heads (no separate K and V, no factor 2); "
        "engines such as vLLM and SGLang cache this latent"
    )
    return _shape(name, layers, heads, 1, nope + rope, hidden, None, None, MLA(rank, rope))


_READERS = {
    "llama": _read_generic,
    "mistral": _read_generic,
    "mixtral": _read_generic,
    "phi3": _read_generic,
    "gemma": _read_generic,
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
