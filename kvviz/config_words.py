"""One English line per code of the config.json reader (kvviz.analysis.sizes.hf_config) and the KV-size checks
(kvviz.analysis.sizes.kvsize): notes on defaults and fallbacks, and errors. The CLI prints them; the app words the
same codes through its catalogs, with these lines as msgids (kvviz_app/calculator/text_config.py passes
its translated tables as ``words``)."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Protocol

from kvviz.analysis.sizes.hf_config import ConfigError, ConfigNote
from kvviz.util.plural import Plural
from kvviz.words import Template


class ConfigWords(Protocol):
    """The tables ``config_note`` and ``size_error`` word codes with: this module, or the app's translated view."""

    UNKNOWN_MODEL_TYPE: str
    CONFIG_NOTES: Mapping[str, Template]
    CONFIG_ERRORS: Mapping[str, Template]
    SIZE_ERRORS: Mapping[str, Template]
    FIELD_NAMES: Mapping[str, str]
    JSON_KINDS: Mapping[str, str]

    def ordinal(self, n: int) -> str: ...

UNKNOWN_MODEL_TYPE = "?"
#: ParsedConfig.family "generic" (no known family: the common field names were read); other families are names.
FAMILY_GENERIC = "generic"

# kvviz.analysis.sizes.hf_config.ConfigNote, by code. {every_nth} is the ordinal of {every} ("6th").
CONFIG_NOTES = {
    "nested_config": "read the nested {key} (a multimodal config; model_type {model_type})",
    "unknown_model_type": "model_type {model_type!r} is not one kvviz knows; read the common field names "
                          "(num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size, head_dim)",
    "missing_model_type": "the config has no model_type; read the common field names "
                          "(num_hidden_layers, num_attention_heads, num_key_value_heads, hidden_size, head_dim)",
    "explicit_head_dim": "explicit head_dim {head_dim} (heads x head_dim = {product:,} differs from hidden_size "
                         "{hidden:,}, so hidden_size / heads would be wrong here)",
    "default_head_dim": "head_dim not in config; used {family}'s default {value}",
    "no_kv_heads": "no num_key_value_heads in config: every query head has its own KV head (MHA)",
    "window_every_layer": Plural("sliding_window {window:,} on every layer (each keeps at most {window:,} token)",
                                 "sliding_window {window:,} on every layer (each keeps at most {window:,} tokens)",
                                 count="window"),
    "qwen_sliding_as_full": "use_sliding_window is false: layer_types' sliding layers are treated as full attention",
    "qwen_sliding_layers": Plural("use_sliding_window: layers {first}..{last} slide over {window:,} token "
                                  "(max_window_layers = {first})",
                                  "use_sliding_window: layers {first}..{last} slide over {window:,} tokens "
                                  "(max_window_layers = {first})", count="window"),
    "qwen_window_unused": "sliding_window is set but use_sliding_window is false: every layer is full attention",
    "default_window": "sliding_window not in config; used {family}'s default {window:,}",
    "alternating_pattern": Plural("no layer_types: every {every_nth} layer is global, the others slide over "
                                  "{window:,} token",
                                  "no layer_types: every {every_nth} layer is global, the others slide over "
                                  "{window:,} tokens", count="window"),
    "default_interval": "no layer_types or full_attention_interval; used the default interval {interval}",
    "interval_pattern": "layer_types from full_attention_interval {every}: every {every_nth} layer is full attention",
    "state_layers": Plural("{state} of {layers} layer is Gated DeltaNet (linear attention): a fixed-size state "
                           "per request, no per-token KV",
                           "{state} of {layers} layers are Gated DeltaNet (linear attention): a fixed-size "
                           "state per request, no per-token KV", count="layers"),
    "falcon_groups": Plural("falcon new_decoder_architecture: {kv} KV head group (num_kv_heads)",
                            "falcon new_decoder_architecture: {kv} KV head groups (num_kv_heads)", count="kv"),
    "falcon_mq_ignored": "falcon multi_query: one shared KV head (num_kv_heads {declared} is ignored by the model)",
    "falcon_mq": "falcon multi_query: one shared KV head",
    "bigcode_mq": "gpt_bigcode multi_query: one shared KV head",
    "bigcode_mha": "gpt_bigcode without multi_query: MHA",
    "jamba_pattern": "jamba: attention on one layer in {period} (offset {offset}), Mamba (fixed-size state) "
                     "on the others",
    "mla_null_rank": "kv_lora_rank is null: no latent compression, read as ordinary attention",
    "mla_default_rank": "kv_lora_rank not in config; used the DeepSeek default {value}",
    "mla_default_rope": "qk_rope_head_dim not in config; used the DeepSeek default {value}",
    "mla_latent": "MLA: each layer caches one latent of kv_lora_rank {rank} + qk_rope_head_dim {rope} = {values} "
                  "values per token, shared by all query heads (no separate K and V, no factor 2); engines such "
                  "as vLLM and SGLang cache this latent",
}

# kvviz.analysis.sizes.hf_config.ConfigError, by code; bad_value and bad_shape (a wrapped kvsize error) are worded
# by SIZE_ERRORS from their reason, bad_shape after the config's name.
CONFIG_ERRORS = {
    "too_big": "config is {mib:.2f} MiB; the limit is 1 MiB (a real config.json is a few KiB)",
    "binary": "{name} looks binary, not a JSON text file",
    "not_utf8": "{name} is not UTF-8 text (a binary file?)",
    "not_text": "{name}: expected text, got {got}",
    "empty": "{name} is empty; paste the contents of a config.json",
    "is_dir": "{name}: is a directory, not a config.json",
    "not_file": "{name}: not a regular file",
    "no_file": "{name}: no such file",
    "no_permission": "{name}: permission denied",
    "unreadable": "{name}: cannot read ({cause})",
    "invalid_json": "{name} is not valid JSON: {detail} at line {line}, column {column}",
    "too_deep": "{name} is nested too deeply",
    "long_number": "{name} holds a number too long to read (over {digits:,} digits)",
    "not_object": "{name} must be a JSON object ({{...}}), got a JSON {kind}",
    "missing_field": "config has no {what} ({keys})",
    "not_bool": "{key} must be true or false, got {value}",
    "no_head_dim": "config has neither head_dim nor hidden_size to derive it from",
    "hidden_not_divisible": "hidden_size {hidden:,} is not divisible by num_attention_heads {heads}; "
                            "set head_dim explicitly",
    "layer_types_not_list": "layer_types must be a list, got a JSON {kind}",
    "layer_types_length": "layer_types has {entries} entries but num_hidden_layers is {layers}",
    "layer_type_unknown": "layer_types[{index}] is {value}, a layer kind kvviz does not know",
    "sliding_no_window": "layer_types has sliding-window layers but sliding_window is not set",
}

# The {what} of missing_field, and the {kind} of not_object / layer_types_not_list.
FIELD_NAMES = {"layers": "layer count", "heads": "attention head count", "hidden": "hidden size"}
JSON_KINDS = {"object": "object", "array": "array", "string": "string", "boolean": "boolean",
              "number": "number", "null": "null"}

# kvviz.analysis.sizes.kvsize.KVSizeError, by code (errors without a code show their own English line).
SIZE_ERRORS = {
    "not_whole": "{name} must be a whole number, got {value}",
    "not_positive": "{name} must be positive, got {value:,}",
    "too_small": "{name} must be at least {low}, got {value:,}",
    "absurd": "{name} = {value:,} is absurd (the limit is {high:,})",
    "kv_exceeds_heads": "kv_heads ({kv_heads}) cannot exceed heads ({heads}): each KV head serves at least "
                        "one query head",
    "unknown_layer_kind": "unknown layer kind: {detail}",
    "layer_kinds_length": "layer kinds list has {entries} entries for {layers} layers",
    "window_missing": "sliding-window layers need a window size (sliding_window)",
    "unknown_dtype": "unknown dtype {name}; use one of {choices}",
}


def ordinal(n: int) -> str:
    """``n`` as an English ordinal: 2nd, 6th."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def _fill(template: Template, params: dict[str, Any]) -> str:
    """``template`` filled with ``params``; a template that needs a param the code did not give shows the
    template's words with the params after them instead of raising (tests keep the two in step)."""
    try:
        return template.format(**params)
    except (KeyError, IndexError, ValueError):
        return f"{template} {params}"


def config_note(note: ConfigNote, words: ConfigWords | None = None) -> str:
    """One ``ConfigNote`` as one line: in English, or with ``words`` (tables and ``ordinal`` of this
    module's names, e.g. the app's translated view)."""
    w = words or sys.modules[__name__]
    params = dict(note.params)
    if "every" in params:
        params["every_nth"] = w.ordinal(params["every"])
    if note.code == "nested_config" and not params.get("model_type"):
        params["model_type"] = w.UNKNOWN_MODEL_TYPE
    return _fill(w.CONFIG_NOTES[note.code], params)


def size_error(exc: Exception, words: ConfigWords | None = None) -> str:
    """A ``ConfigError`` or ``KVSizeError`` as one line, in English or with ``words`` (as config_note);
    the exception's own line when it has no known code."""
    w = words or sys.modules[__name__]
    code = getattr(exc, "code", "")
    params = dict(getattr(exc, "params", {}) or {})
    if isinstance(exc, ConfigError) and code in ("bad_value", "bad_shape"):
        reason = _reason(params, w.SIZE_ERRORS)
        return f"{params['source']}: {reason}" if code == "bad_shape" else reason
    if isinstance(exc, ConfigError) and code in CONFIG_ERRORS:
        if "what" in params:
            params["what"] = w.FIELD_NAMES.get(params["what"], params["what"])
        if "kind" in params:
            params["kind"] = w.JSON_KINDS.get(params["kind"], params["kind"])
        return _fill(w.CONFIG_ERRORS[code], params)
    if code in w.SIZE_ERRORS:
        return _fill(w.SIZE_ERRORS[code], params)
    return str(exc)


def _reason(params: dict[str, Any], size_errors: Mapping[str, Template]) -> str:
    reason = params.get("reason") or ""
    if reason in size_errors:
        return _fill(size_errors[reason], params)
    return str(params.get("message") or reason)
