"""The real model: loading, device choice, tokenizing, prefill with KV capture, prefix reuse.

The only kvviz package that imports torch. Public API::

    tokenize(text, model_name=None, max_tokens=2048) -> Tokenized
    load_tokenizer(model_name=None)
    load_model(model_name=None, device=None, dtype=None, progress=None, backend=None) -> LoadedModel
    prefill(lm, text=None, token_ids=None, max_tokens=2048) -> PrefillResult
    prefill_continue(lm, prefix_keys, prefix_values, token_ids) -> PrefillResult
"""

import os

# Under CPU oversubscription (shared machines, a Streamlit server next to tests) OpenMP threads that
# spin while waiting make small prefills 5-20x slower; sleeping waiters cost little when idle. Only
# effective when set before torch is first imported; an explicit setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from kvviz.model.embedded import embedded_cache_paths, ensure_embedded_cache  # noqa: E402 - after the OpenMP setting above
from kvviz.model.loader import (
    LoadedModel,
    ModelInfo,
    clear_model_cache,
    find_loaded_model,
    load_model,
    load_tokenizer,
    loaded_models,
)
from kvviz.model.prefill import PrefillResult, kv_bytes, prefill, prefill_continue
from kvviz.model.resolve import (
    ModelSource,
    embedded_gguf_path,
    resolve_backend,
    resolve_device,
    resolve_dtype,
    resolve_model,
)
from kvviz.model.settings import (
    DEFAULT_MAX_TOKENS,
    EMBEDDED_MODEL,
    MAX_TOKENS_CEILING,
    InputError,
    ModelLoadError,
    cache_dir,
    default_model,
)
from kvviz.model.tokens import Tokenized, token_pieces, tokenize, tokenize_ids

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "EMBEDDED_MODEL",
    "MAX_TOKENS_CEILING",
    "InputError",
    "LoadedModel",
    "ModelInfo",
    "ModelLoadError",
    "ModelSource",
    "PrefillResult",
    "Tokenized",
    "cache_dir",
    "clear_model_cache",
    "default_model",
    "embedded_cache_paths",
    "embedded_gguf_path",
    "ensure_embedded_cache",
    "find_loaded_model",
    "kv_bytes",
    "load_model",
    "load_tokenizer",
    "loaded_models",
    "prefill",
    "prefill_continue",
    "resolve_backend",
    "resolve_device",
    "resolve_dtype",
    "resolve_model",
    "token_pieces",
    "tokenize",
    "tokenize_ids",
]
