"""The real model: loading, device choice, tokenizing, prefill with KV capture, prefix reuse.

The only kvviz package that imports torch. Public API::

    tokenize(text, model_name=None, max_tokens=2048) -> Tokenized
    load_tokenizer(model_name=None)
    load_model(model_name=None, device=None, dtype=None, progress=None, backend=None) -> LoadedModel
    prefill(lm, text=None, token_ids=None, max_tokens=2048) -> PrefillResult
    prefill_continue(lm, prefix_keys, prefix_values, token_ids) -> PrefillResult
"""

import importlib
import sys
import types
from typing import TYPE_CHECKING

# OMP_WAIT_POLICY=PASSIVE (sleeping OpenMP waiters) is set by the programs, before torch is imported:
# kvviz.settings.prefer_passive_openmp() in app.py and the CLI, the Makefile and tests/conftest.py.

# Names resolve on first use (PEP 562): importing kvviz.model, or a light submodule such as
# kvviz.model.settings, does not import torch; `from kvviz.model import prefill` still works.
_HOMES: dict[str, str] = {
    "embedded_cache_paths": "kvviz.model.embedded",
    "ensure_embedded_cache": "kvviz.model.embedded",
    "LoadedModel": "kvviz.model.loader",
    "ModelInfo": "kvviz.model.loader",
    "clear_model_cache": "kvviz.model.loader",
    "find_loaded_model": "kvviz.model.loader",
    "load_model": "kvviz.model.loader",
    "load_tokenizer": "kvviz.model.loader",
    "loaded_models": "kvviz.model.loader",
    "PrefillResult": "kvviz.model.prefill",
    "kv_bytes": "kvviz.model.prefill",
    "prefill": "kvviz.model.prefill",
    "prefill_continue": "kvviz.model.prefill",
    "ModelSource": "kvviz.model.resolve",
    "embedded_gguf_path": "kvviz.model.resolve",
    "resolve_backend": "kvviz.model.resolve",
    "resolve_device": "kvviz.model.resolve",
    "resolve_dtype": "kvviz.model.resolve",
    "resolve_model": "kvviz.model.resolve",
    "DEFAULT_MAX_TOKENS": "kvviz.model.settings",
    "EMBEDDED_MODEL": "kvviz.model.settings",
    "MAX_TOKENS_CEILING": "kvviz.model.settings",
    "InputError": "kvviz.model.settings",
    "ModelLoadError": "kvviz.model.settings",
    "cache_dir": "kvviz.model.settings",
    "default_model": "kvviz.model.settings",
    "Tokenized": "kvviz.model.tokens",
    "token_pieces": "kvviz.model.tokens",
    "tokenize": "kvviz.model.tokens",
    "tokenize_ids": "kvviz.model.tokens",
}


def __getattr__(name: str):
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])


class _Package(types.ModuleType):
    """``kvviz.model.prefill`` names the function, as with eager imports: loading the submodule of the same
    name would otherwise rebind the package attribute to the module (the import system's setattr)."""

    @property
    def prefill(self):
        return importlib.import_module("kvviz.model.prefill").prefill

    @prefill.setter
    def prefill(self, value) -> None:  # the import system binding the submodule: keep the function
        pass


sys.modules[__name__].__class__ = _Package


if TYPE_CHECKING:  # the same names, eagerly, for type checkers
    from kvviz.model.embedded import embedded_cache_paths, ensure_embedded_cache
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
