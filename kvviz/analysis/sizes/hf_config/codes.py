"""What the config.json reader says, as codes: a ``ConfigNote`` for each default, fallback or nesting it
used, a ``ConfigError`` for a config it cannot read. The words are the view's (kvviz_app.calculator.text_config).

Invariant: every code is listed in ``NOTE_CODES`` / ``ERROR_CODES``, and ``params`` hold only numbers
and strings (field names, model types, file names), so a view can word them in any language.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvviz.analysis.sizes.kvsize import KVSizeError

NOTE_CODES: tuple[str, ...] = (
    "nested_config", "unknown_model_type", "missing_model_type",
    "explicit_head_dim", "default_head_dim", "no_kv_heads", "window_every_layer",
    "qwen_sliding_as_full", "qwen_sliding_layers", "qwen_window_unused",
    "default_window", "alternating_pattern",
    "default_interval", "interval_pattern", "state_layers",
    "falcon_groups", "falcon_mq_ignored", "falcon_mq", "bigcode_mq", "bigcode_mha",
    "jamba_pattern", "mla_null_rank", "mla_default_rank", "mla_default_rope", "mla_latent",
)
"""Every ``ConfigNote.code``."""

ERROR_CODES: tuple[str, ...] = (
    "too_big", "binary", "not_utf8", "not_text", "empty", "is_dir", "not_file", "no_file", "no_permission",
    "unreadable", "invalid_json", "too_deep", "long_number", "not_object",
    "missing_field", "not_bool", "no_head_dim", "hidden_not_divisible",
    "layer_types_not_list", "layer_types_length", "layer_type_unknown", "sliding_no_window",
    "bad_value", "bad_shape",
)
"""Every ``ConfigError.code``. ``bad_value`` / ``bad_shape`` wrap a kvviz.analysis.sizes.kvsize error: their params
hold its ``reason`` (a KVSizeError code) and its params."""


@dataclass(frozen=True)
class ConfigNote:
    """One default, fallback or nesting that affected the shape read from a config."""

    code: str
    params: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, "params": dict(self.params)}


class ConfigError(KVSizeError):
    """A config.json that cannot be read as a model: a code and its params (``str()`` shows both, for logs;
    people read it through kvviz_app.calculator.text_config.size_error)."""

    def __init__(self, code: str, **params: Any) -> None:
        detail = ", ".join(f"{k}={v!r}" for k, v in params.items())
        super().__init__(f"config error {code}" + (f" ({detail})" if detail else ""), code, **params)

    @classmethod
    def wrap(cls, exc: KVSizeError, code: str, **params: Any) -> ConfigError:
        """``exc`` (a kvsize error met while reading the config) as ``code``, keeping its reason (its code
        and params; its English line as ``message`` when it has no code)."""
        inner = dict(exc.params) if exc.code else {"message": str(exc)}
        return cls(code, reason=exc.code, **inner, **params)
