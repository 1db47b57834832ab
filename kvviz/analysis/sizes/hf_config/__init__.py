"""Read a Hugging Face ``config.json`` into a ``ModelShape``: layers, heads, KV heads, head_dim,
per-layer kinds, sliding window, MLA.

Knows the field names and defaults of: llama, mistral, mixtral, qwen2(_moe), qwen3(_moe), qwen3_next,
qwen3_5(_moe) (nested ``text_config``), gemma2, gemma3 (nested ``text_config``), phi3, falcon
(``multi_query`` / ``new_decoder_architecture``), gpt2, gpt_neox, gpt_bigcode, jamba, deepseek_v2,
deepseek_v3 (MLA). Any other ``model_type`` falls back to the common field names and says so.

Speaks in codes: what it assumed is a tuple of ``ConfigNote(code, params)``, what it refuses a
``ConfigError(code, **params)``; kvviz_app.calculator.text_config words both for the page and the CLI.

    codes.py    ConfigNote, ConfigError, NOTE_CODES, ERROR_CODES
    fields.py   single fields: counts, booleans, head_dim, KV heads, layer_types, windows
    readers.py  one reader per family (READERS)
    parse.py    entry points: parse_config_text, load_config_file, parse_config -> ParsedConfig
"""

from kvviz.analysis.sizes.hf_config.codes import ERROR_CODES, NOTE_CODES, ConfigError, ConfigNote
from kvviz.analysis.sizes.hf_config.fields import KNOWN_FAMILIES
from kvviz.analysis.sizes.hf_config.parse import (
    MAX_CONFIG_BYTES,
    ParsedConfig,
    load_config_file,
    parse_config,
    parse_config_text,
)

__all__ = [
    "ERROR_CODES", "KNOWN_FAMILIES", "MAX_CONFIG_BYTES", "NOTE_CODES", "ConfigError", "ConfigNote", "ParsedConfig",
    "load_config_file", "parse_config", "parse_config_text",
]
