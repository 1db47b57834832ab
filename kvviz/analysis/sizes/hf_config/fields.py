"""Reading single fields of a config.json: counts, booleans, head_dim, KV heads, layer_types, windows.

Each helper either returns a checked value (appending a ``ConfigNote`` for any default it used) or raises
a ``ConfigError``; none raises anything else.
"""

from __future__ import annotations

from typing import Any

from kvviz.analysis.sizes.hf_config.codes import ConfigError, ConfigNote
from kvviz.analysis.sizes.kvsize import (
    MAX_HEAD_DIM,
    MAX_HEADS,
    MAX_LAYERS,
    KVSizeError,
    LayerKind,
    check_count,
)

KNOWN_FAMILIES: tuple[str, ...] = (
    "llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen3_next",
    "qwen3_5", "qwen3_5_moe", "gemma", "gemma2", "gemma3", "phi3", "falcon", "gpt2", "gpt_neox",
    "gpt_bigcode", "jamba", "deepseek_v2", "deepseek_v3",
)

NESTED_KEYS = ("text_config", "llm_config", "language_config")

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

LAYERS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
HEADS = ("num_attention_heads", "n_head", "num_heads", "n_heads")
KV_HEADS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num", "n_kv_heads")
HIDDEN = ("hidden_size", "n_embd", "d_model", "model_dim", "dim")

Notes = list[ConfigNote]


def json_kind(value: Any) -> str:
    """The JSON type of a decoded value: object, array, string, boolean, number or null."""
    return {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}.get(
        type(value), "null" if value is None else type(value).__name__
    )


def str_field(cfg: dict[str, Any], key: str) -> str:
    value = cfg.get(key)
    return value.strip() if isinstance(value, str) else ""


def family_of(model_type: str) -> str:
    """The known family a ``model_type`` belongs to ("" if none): falcon aliases, ``*_text`` variants."""
    t = model_type.lower().replace("-", "_")
    if t in ("refinedwebmodel", "refinedweb", "rw"):
        return "falcon"
    if t.endswith("_text") and t[: -len("_text")] in KNOWN_FAMILIES:
        t = t[: -len("_text")]
    return t if t in KNOWN_FAMILIES else ""


def display_name(top: dict[str, Any], cfg: dict[str, Any], model_type: str, fallback: str) -> str:
    for source in (top, cfg):
        raw = source.get("_name_or_path")
        if isinstance(raw, str) and raw.strip() and len(raw) < 200:
            return raw.strip().rstrip("/").split("/")[-1] if raw.startswith("/") else raw.strip()
    for source in (top, cfg):
        archs = source.get("architectures")
        if isinstance(archs, list) and archs and isinstance(archs[0], str) and len(archs[0]) < 200:
            return archs[0]
    return model_type or fallback


def present(cfg: dict[str, Any], key: str) -> bool:
    return key in cfg and cfg[key] is not None


def int_field(cfg: dict[str, Any], keys: tuple[str, ...], *, high: int, low: int = 1) -> int | None:
    """The first of ``keys`` that is set, checked as a count; None when none is set."""
    for key in keys:
        if present(cfg, key):
            try:
                return check_count(key, cfg[key], low=low, high=high)
            except KVSizeError as exc:
                raise ConfigError.wrap(exc, "bad_value") from None
    return None


def need(cfg: dict[str, Any], keys: tuple[str, ...], what: str, *, high: int) -> int:
    """A required count; ``what`` (layers, heads, hidden) names it in the error when it is missing."""
    value = int_field(cfg, keys, high=high)
    if value is None:
        raise ConfigError("missing_field", what=what, keys=" / ".join(keys))
    return value


def bool_field(cfg: dict[str, Any], key: str, default: bool) -> bool:
    value = cfg.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    raise ConfigError("not_bool", key=key, value=repr(value))


def head_dim(cfg: dict[str, Any], family: str, heads: int, hidden: int | None, notes: Notes) -> int:
    """An explicit head_dim, the family's default, or hidden_size / heads (which must divide)."""
    explicit = int_field(cfg, ("head_dim", "attention_head_dim", "kv_channels"), high=MAX_HEAD_DIM)
    if explicit is not None:
        if hidden is not None and explicit * heads != hidden:
            notes.append(ConfigNote("explicit_head_dim", {"head_dim": explicit, "product": explicit * heads,
                                                          "hidden": hidden}))
        return explicit
    if family in _HEAD_DIM_DEFAULT:
        value = _HEAD_DIM_DEFAULT[family]
        notes.append(ConfigNote("default_head_dim", {"family": family, "value": value}))
        return value
    if hidden is None:
        raise ConfigError("no_head_dim")
    if hidden % heads:
        raise ConfigError("hidden_not_divisible", hidden=hidden, heads=heads)
    return hidden // heads


def kv_heads_or_heads(cfg: dict[str, Any], heads: int, notes: Notes) -> int:
    kv = int_field(cfg, KV_HEADS, high=MAX_HEADS)
    if kv is None:
        notes.append(ConfigNote("no_kv_heads"))
        return heads
    return kv


def layer_kinds_from_types(cfg: dict[str, Any], layers: int) -> tuple[LayerKind, ...] | None:
    """``layer_types`` read as layer kinds (one per layer), or None when the config has none."""
    raw = cfg.get("layer_types")
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise ConfigError("layer_types_not_list", kind=json_kind(raw))
    if len(raw) != layers:
        raise ConfigError("layer_types_length", entries=len(raw), layers=layers)
    kinds = []
    for i, item in enumerate(raw):
        word = item.strip().lower() if isinstance(item, str) else None
        if word not in _LAYER_TYPE_WORDS:
            raise ConfigError("layer_type_unknown", index=i, value=repr(item))
        kinds.append(_LAYER_TYPE_WORDS[word])
    return tuple(kinds)


def window(cfg: dict[str, Any]) -> int | None:
    return int_field(cfg, ("sliding_window", "sliding_window_size"), high=1 << 40)


def base_counts(cfg: dict[str, Any]) -> tuple[int, int, int | None]:
    """(layers, query heads, hidden size or None): what every reader needs first."""
    layers = need(cfg, LAYERS, "layers", high=MAX_LAYERS)
    heads = need(cfg, HEADS, "heads", high=MAX_HEADS)
    hidden = int_field(cfg, HIDDEN, high=10_000_000)
    return layers, heads, hidden
