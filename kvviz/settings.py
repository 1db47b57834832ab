"""Every ``KVVIZ_*`` and Hugging Face variable kvviz reads, parsed in one place into a frozen ``Settings``.

``settings()`` parses the environment once per distinct set of values (a changed variable, as in a test's
``monkeypatch.setenv``, is parsed afresh) and never writes ``os.environ``. Each field has its default; a
variable that is set but invalid leaves the default in the field and its one-line English error in
``Settings.errors`` under the variable's name: the reader decides whether that is fatal (``KVVIZ_MAX_TOKENS``)
or a note (``KVVIZ_KV_CACHE_MIB``).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType

from kvviz.errors import InputError
from kvviz.mirror.host_arc import EVICTION_POLICIES

#: Default and ceiling for the number of tokens one prefill may process.
DEFAULT_MAX_TOKENS = 2048
MAX_TOKENS_CEILING = 32768
#: The engine's K/V memory budget (vLLM sizes its KV cache from free GPU memory; kvviz from this), MiB.
DEFAULT_KV_CACHE_MIB = 256
MAX_KV_CACHE_MIB = 1 << 20

#: Every variable ``settings()`` reads (the record's fields say what each one means).
NAMES = (
    "KVVIZ_CACHE_DIR", "KVVIZ_MODEL", "KVVIZ_DEVICE", "KVVIZ_DTYPE", "KVVIZ_BACKEND", "KVVIZ_MAX_TOKENS",
    "KVVIZ_PRESENTER_KEY", "KVVIZ_KV_CACHE_MIB", "HF_HUB_OFFLINE",
    "KVVIZ_API", "KVVIZ_API_HOST", "KVVIZ_API_PORT", "KVVIZ_API_KEY", "KVVIZ_API_MAX_WAITING",
    "KVVIZ_KV_EVENTS_ENDPOINT", "KVVIZ_STEP_THREADS", "OMP_NUM_THREADS", "KVVIZ_KV_OFFLOADING_SIZE",
    "KVVIZ_ATTENTION_KERNEL", "KVVIZ_KV_OFFLOADING_EVICTION_POLICY",
)
#: The OpenAI-compatible API (kvviz.server): where the app's process serves it, and its waiting-queue bound.
DEFAULT_API_HOST = "127.0.0.1"
DEFAULT_API_PORT = 8000
DEFAULT_API_MAX_WAITING = 64
_OFF = frozenset({"0", "false", "no", "off"})
_TRUE = frozenset({"1", "true", "yes", "on"})


@dataclass(frozen=True)
class Settings:
    """The parsed environment. Strings are stripped; "" and unset both mean "use the default"."""

    cache_dir: Path  # KVVIZ_CACHE_DIR: de-quantised model copies (default ~/.cache/kvviz)
    model: str | None  # KVVIZ_MODEL: the model used when none is named (None: the embedded one)
    device: str | None  # KVVIZ_DEVICE, KVVIZ_DTYPE, KVVIZ_BACKEND: validated where a model loads
    dtype: str | None
    backend: str | None
    max_tokens: int  # KVVIZ_MAX_TOKENS: 1..MAX_TOKENS_CEILING
    presenter_key: str | None  # KVVIZ_PRESENTER_KEY (None: the room generates one)
    kv_cache_bytes: int  # KVVIZ_KV_CACHE_MIB: the engine's K/V memory, 1..1,048,576 MiB (whole MiB)
    hf_hub_offline: bool  # HF_HUB_OFFLINE: 1/true/yes/on
    api: bool = True  # KVVIZ_API: the app's process serves the API unless 0/false/no/off
    api_host: str = DEFAULT_API_HOST  # KVVIZ_API_HOST
    api_port: int = DEFAULT_API_PORT  # KVVIZ_API_PORT: 0..65535 (0: any free port)
    api_key: str | None = None  # KVVIZ_API_KEY: required as 'Authorization: Bearer' on /v1 (None: no key)
    api_max_waiting: int = DEFAULT_API_MAX_WAITING  # KVVIZ_API_MAX_WAITING: 1..100000 (more get 503)
    kv_events_endpoint: str | None = None  # KVVIZ_KV_EVENTS_ENDPOINT: the app's KV-event PUB address
    # KVVIZ_STEP_THREADS: torch threads for every engine step of a serving loop, 1..1024 (None: the policy
    # of kvviz.engine.threads); omp_num_threads_set: OMP_NUM_THREADS is set, so every step uses torch's count
    step_threads: int | None = None
    omp_num_threads_set: bool = False
    # KVVIZ_KV_OFFLOADING_SIZE: GiB of host memory for the app's engine's host tier, (0, 1024] (None: off)
    kv_offloading_size: float | None = None
    # KVVIZ_KV_OFFLOADING_EVICTION_POLICY: how that tier evicts, lru (the default) or arc (any case)
    kv_offloading_eviction_policy: str = "lru"
    # KVVIZ_ATTENTION_KERNEL: the engine's compiled CPU attention (kvviz.engine.kernels) unless 0/false/no/off
    attention_kernel: bool = True
    errors: Mapping[str, str] = field(default_factory=dict)  # variable name -> its one-line error


def _number(raw: str) -> float | None:
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def parse(env: Mapping[str, str]) -> Settings:
    """The settings ``env`` describes (pure: reads only ``env``)."""
    raw = {name: (env.get(name) or "").strip() for name in NAMES}
    errors: dict[str, str] = {}

    def number(name: str, default: float, lo: float, hi: float, error: str) -> float:
        if not raw[name]:
            return default
        value = _number(raw[name])
        if value is None or not lo <= value <= hi:
            errors[name] = error.format(raw=raw[name])
            return default
        return value

    max_tokens = DEFAULT_MAX_TOKENS
    if raw["KVVIZ_MAX_TOKENS"]:
        try:
            max_tokens = int(raw["KVVIZ_MAX_TOKENS"])
            if not 1 <= max_tokens <= MAX_TOKENS_CEILING:
                raise ValueError(max_tokens)
        except ValueError:
            max_tokens = DEFAULT_MAX_TOKENS
            errors["KVVIZ_MAX_TOKENS"] = (f"KVVIZ_MAX_TOKENS={raw['KVVIZ_MAX_TOKENS']!r} is not a valid token limit "
                                          f"(1..{MAX_TOKENS_CEILING:,})")
    kv_cache_mib = DEFAULT_KV_CACHE_MIB
    if raw["KVVIZ_KV_CACHE_MIB"]:
        text = raw["KVVIZ_KV_CACHE_MIB"]
        try:
            kv_cache_mib = int(text)
            if not 1 <= kv_cache_mib <= MAX_KV_CACHE_MIB:
                raise ValueError(kv_cache_mib)
        except ValueError:
            kv_cache_mib = DEFAULT_KV_CACHE_MIB
            errors["KVVIZ_KV_CACHE_MIB"] = f"KVVIZ_KV_CACHE_MIB={text!r} is not a size in MiB (1..{MAX_KV_CACHE_MIB:,})"
    def whole(name: str, default: int, lo: int, hi: int, error: str) -> int:
        if not raw[name]:
            return default
        if not raw[name].isdigit() or not lo <= int(raw[name]) <= hi:
            errors[name] = error.format(raw=raw[name])
            return default
        return int(raw[name])

    api_port = whole("KVVIZ_API_PORT", DEFAULT_API_PORT, 0, 65535, "KVVIZ_API_PORT={raw!r} is not a TCP port (0..65535)")
    api_max_waiting = whole("KVVIZ_API_MAX_WAITING", DEFAULT_API_MAX_WAITING, 1, 100_000,
                            "KVVIZ_API_MAX_WAITING={raw!r} is not a queue length (1..100000)")
    step_threads = whole("KVVIZ_STEP_THREADS", 0, 1, 1024, "KVVIZ_STEP_THREADS={raw!r} is not a thread count (1..1024)")
    offloading = number("KVVIZ_KV_OFFLOADING_SIZE", 0.0, 0.0, 1024.0,
                        "KVVIZ_KV_OFFLOADING_SIZE={raw!r} is not a size in GiB (0..1024, 0: off)")
    policy = raw["KVVIZ_KV_OFFLOADING_EVICTION_POLICY"].lower() or "lru"
    if policy not in EVICTION_POLICIES:
        errors["KVVIZ_KV_OFFLOADING_EVICTION_POLICY"] = (
            f"KVVIZ_KV_OFFLOADING_EVICTION_POLICY={raw['KVVIZ_KV_OFFLOADING_EVICTION_POLICY']!r} is not an eviction "
            f"policy ({' or '.join(EVICTION_POLICIES)})")
        policy = "lru"
    cache = raw["KVVIZ_CACHE_DIR"]
    return Settings(
        cache_dir=Path(cache).expanduser() if cache else Path.home() / ".cache" / "kvviz",
        model=raw["KVVIZ_MODEL"] or None,
        device=raw["KVVIZ_DEVICE"] or None,
        dtype=raw["KVVIZ_DTYPE"] or None,
        backend=raw["KVVIZ_BACKEND"] or None,
        max_tokens=max_tokens,
        presenter_key=raw["KVVIZ_PRESENTER_KEY"] or None,
        kv_cache_bytes=kv_cache_mib << 20,
        hf_hub_offline=raw["HF_HUB_OFFLINE"].lower() in _TRUE,
        api=raw["KVVIZ_API"].lower() not in _OFF,
        api_host=raw["KVVIZ_API_HOST"] or DEFAULT_API_HOST,
        api_port=api_port,
        api_key=raw["KVVIZ_API_KEY"] or None,
        api_max_waiting=api_max_waiting,
        kv_events_endpoint=raw["KVVIZ_KV_EVENTS_ENDPOINT"] or None,
        step_threads=step_threads or None,
        omp_num_threads_set=bool(raw["OMP_NUM_THREADS"]),
        kv_offloading_size=offloading or None,
        kv_offloading_eviction_policy=policy,
        attention_kernel=raw["KVVIZ_ATTENTION_KERNEL"].lower() not in _OFF,
        errors=MappingProxyType(errors),
    )


@lru_cache(maxsize=16)
def _parse_snapshot(snapshot: tuple[tuple[str, str | None], ...]) -> Settings:
    return parse({name: value for name, value in snapshot if value is not None})


def settings() -> Settings:
    """The settings of this process's environment, parsed once per distinct set of values."""
    return _parse_snapshot(tuple((name, os.environ.get(name)) for name in NAMES))


def kv_cache_bytes_default() -> int:
    """The engine's K/V budget in bytes: ``KVVIZ_KV_CACHE_MIB`` (MiB, 1..1,048,576) if set, else 256 MiB; a bad
    value is an ``InputError`` (code ``bad_env_kv_cache``)."""
    parsed = settings()
    if "KVVIZ_KV_CACHE_MIB" in parsed.errors:
        raise InputError(parsed.errors["KVVIZ_KV_CACHE_MIB"], "bad_env_kv_cache", high=MAX_KV_CACHE_MIB)
    return parsed.kv_cache_bytes


#: CLI commands that run a dedicated inference server: they keep OpenMP's own wait policy (a thread spins
#: a little before it sleeps between two parallel regions), as vLLM-CPU's workers run; a step is hundreds of
#: regions, and waking a sleeping thread for each made a two-thread decode step 1.3-1.7x slower.
DEDICATED_SERVER_COMMANDS = frozenset({"serve"})


def prefer_passive_openmp(argv: list[str] | None = None) -> None:
    """At program start (app, CLI), before torch is imported: idle OpenMP threads sleep instead of spinning
    (beside other busy threads, as the app's pages or a shared CPU, spinning slows every step), except for a
    dedicated server command (``argv[0]`` in ``DEDICATED_SERVER_COMMANDS``); an explicit setting wins."""
    if argv and argv[0] in DEDICATED_SERVER_COMMANDS:
        return
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def kv_offloading_size_default() -> float | None:
    """The app's engine's host tier in GiB: ``KVVIZ_KV_OFFLOADING_SIZE`` if set and above 0, else None (off);
    a bad value is an ``InputError`` (code ``bad_env_kv_offloading``)."""
    parsed = settings()
    if "KVVIZ_KV_OFFLOADING_SIZE" in parsed.errors:
        raise InputError(parsed.errors["KVVIZ_KV_OFFLOADING_SIZE"], "bad_env_kv_offloading", high=1024)
    return parsed.kv_offloading_size


def kv_offloading_eviction_policy_default() -> str:
    """The app's engine's host-tier eviction policy: ``KVVIZ_KV_OFFLOADING_EVICTION_POLICY`` (lru or arc) if set,
    else lru; a bad value is an ``InputError`` (code ``bad_env_kv_offloading_policy``)."""
    parsed = settings()
    if "KVVIZ_KV_OFFLOADING_EVICTION_POLICY" in parsed.errors:
        raise InputError(parsed.errors["KVVIZ_KV_OFFLOADING_EVICTION_POLICY"], "bad_env_kv_offloading_policy")
    return parsed.kv_offloading_eviction_policy
