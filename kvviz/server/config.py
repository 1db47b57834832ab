"""The server's settings: one frozen record, filled by ``python -m kvviz serve`` or, for the API inside
the app's process, from kvviz.settings (``KVVIZ_API``, ``KVVIZ_API_HOST``, ``KVVIZ_API_PORT``,
``KVVIZ_API_KEY``, ``KVVIZ_API_MAX_WAITING``, ``KVVIZ_KV_EVENTS_ENDPOINT``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kvviz.model.settings import EMBEDDED_ALIASES
from kvviz.settings import DEFAULT_API_HOST, DEFAULT_API_MAX_WAITING, DEFAULT_API_PORT, settings

SERVED_MODEL = "HuggingFaceTB/SmolLM2-135M-Instruct"  # the embedded model's Hugging Face id, as vLLM names it
DEFAULT_HOST = DEFAULT_API_HOST
DEFAULT_PORT = DEFAULT_API_PORT
DEFAULT_MAX_WAITING = DEFAULT_API_MAX_WAITING
MAX_BODY_BYTES = 2 * 1024 * 1024
RETRY_AFTER_S = 1


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


API_SETTINGS = ("KVVIZ_API_HOST", "KVVIZ_API_PORT", "KVVIZ_API_KEY", "KVVIZ_API_MAX_WAITING",
                "KVVIZ_KV_EVENTS_ENDPOINT")


def api_enabled() -> bool:
    """``KVVIZ_API``: the app's process serves the API unless it is 0/off/false/no."""
    return settings().api


def from_env(presenter_key: str | None = None) -> ServerConfig:
    """The in-app server's settings (kvviz.settings); ValueError (one line) for a malformed variable."""
    s = settings()
    bad = [s.errors[name] for name in API_SETTINGS if name in s.errors]
    if bad:
        raise ValueError(bad[0])
    return ServerConfig(host=s.api_host, port=s.api_port, api_key=s.api_key, presenter_key=presenter_key,
                        max_waiting=s.api_max_waiting, kv_events_endpoint=s.kv_events_endpoint)
