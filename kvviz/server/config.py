"""The server's settings: one frozen record, filled by ``python -m kvviz serve`` or from ``KVVIZ_API*``.

``KVVIZ_API`` (on unless 0/off/false/no) starts the API inside the Streamlit app's process on
``KVVIZ_API_HOST`` (default 127.0.0.1) : ``KVVIZ_API_PORT`` (default 8000); ``KVVIZ_API_KEY`` requires
``Authorization: Bearer`` on /v1; ``KVVIZ_API_MAX_WAITING`` bounds the waiting queue;
``KVVIZ_KV_EVENTS_ENDPOINT`` publishes KV events.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from kvviz.model.settings import EMBEDDED_ALIASES

SERVED_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the embedded model's Hugging Face id, as vLLM names it
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
DEFAULT_MAX_WAITING = 64
MAX_BODY_BYTES = 2 * 1024 * 1024
RETRY_AFTER_S = 1
OFF = frozenset({"0", "off", "false", "no"})


@dataclass(frozen=True)
class ServerConfig:
    """What one API server does: where it listens, its keys, its queue bound and its KV-event sockets."""

    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    api_key: str | None = None
    presenter_key: str | None = None
    max_waiting: int = DEFAULT_MAX_WAITING
    model_name: str = SERVED_MODEL
    aliases: frozenset[str] = field(default_factory=lambda: frozenset(EMBEDDED_ALIASES))
    kv_events_endpoint: str | None = None
    kv_events_replay_endpoint: str | None = None
    kv_events_topic: str = ""
    max_body_bytes: int = MAX_BODY_BYTES
    retry_after_s: int = RETRY_AFTER_S

    def knows_model(self, name: str | None) -> bool:
        """True for no model, the served id, or an alias of the embedded model (case-insensitive)."""
        if name is None or name == self.model_name:
            return True
        return name.strip().lower() in self.aliases or name.strip().lower() == self.model_name.lower()


def _int_env(name: str, default: int, low: int, high: int) -> int:
    raw = os.environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"{name}={raw[:40]!r} is not an integer") from None
    if not low <= value <= high:
        raise ValueError(f"{name} must be in {low}..{high}, got {value}")
    return value


def api_enabled() -> bool:
    """``KVVIZ_API``: the app's process serves the API unless it is 0/off/false/no."""
    return os.environ.get("KVVIZ_API", "").strip().lower() not in OFF


def from_env(presenter_key: str | None = None) -> ServerConfig:
    """The in-app server's settings; ValueError (one line) for a malformed variable."""
    return ServerConfig(
        host=os.environ.get("KVVIZ_API_HOST", "").strip() or DEFAULT_HOST,
        port=_int_env("KVVIZ_API_PORT", DEFAULT_PORT, 0, 65535),  # 0: any free port
        api_key=os.environ.get("KVVIZ_API_KEY", "").strip() or None,
        presenter_key=presenter_key,
        max_waiting=_int_env("KVVIZ_API_MAX_WAITING", DEFAULT_MAX_WAITING, 1, 100_000),
        kv_events_endpoint=os.environ.get("KVVIZ_KV_EVENTS_ENDPOINT", "").strip() or None,
    )
