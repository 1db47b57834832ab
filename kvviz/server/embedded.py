"""The API inside the Streamlit app's process, on its own port, over the process-wide engine loop, so
requests from the pages and from API clients share one engine and one prefix cache.

``start_api_once`` is idempotent and never raises into a page: a disabled API (``KVVIZ_API=0``), a bad
setting or a busy port is one line on stderr. The engine (the process-wide ``get_engine_loop``, which
the pages share) is created in a background thread, never on the page's run.
"""

from __future__ import annotations

import sys
import threading
from typing import TYPE_CHECKING, Any

from kvviz.server import config as server_config

if TYPE_CHECKING:  # types only: the engine (torch) is imported in the warm-up thread
    from fastapi import FastAPI

    from kvviz.engine import EngineLoop, SamplingParams

_LOCK = threading.Lock()
_STARTED: dict[str, Any] = {}


def _presenter_key() -> str:
    from kvviz.experiments.room.service import get_room

    return get_room().presenter_key  # the room's key: one presenter key per process


def _engine_loop() -> EngineLoop:
    from kvviz.engine import get_engine_loop

    return get_engine_loop()


def _sampling_params(**kwargs: Any) -> SamplingParams:
    from kvviz.server.app import engine_params

    return engine_params(**kwargs)


def _warm(app: FastAPI) -> None:
    """Create the engine in the background, so /metrics shows the pool before the first request."""
    try:
        app.state.serving.loop  # noqa: B018 - the property creates the engine loop
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback in the app's log
        print(f"kvviz: the API's engine did not start: {type(exc).__name__}: {str(exc)[:200]}",
              file=sys.stderr, flush=True)


def start_api_once() -> str | None:
    """Start the API server in this process once; its URL, or None when it is off or could not start."""
    with _LOCK:
        if "done" in _STARTED:
            return _STARTED.get("url")
        _STARTED["done"] = True
        if not server_config.api_enabled():
            return None
        try:
            from kvviz.fleet.subscriber import check_bind_endpoint
            from kvviz.server.app import create_app
            from kvviz.server.kv_publisher import KVEventPublisher, replay_endpoint_for
            from kvviz.server.uvicorn_server import ServerThread

            config = server_config.from_env(_presenter_key())
            publisher = None
            if config.kv_events_endpoint:
                endpoint = check_bind_endpoint(config.kv_events_endpoint, "KVVIZ_KV_EVENTS_ENDPOINT")
                publisher = KVEventPublisher(endpoint, replay_endpoint_for(endpoint))
            app = create_app(_engine_loop, config, make_params=_sampling_params, publisher=publisher)
            thread = ServerThread(app, config.host, config.port)
            thread.start()
        except (ValueError, RuntimeError, OSError) as exc:
            print(f"kvviz: the OpenAI-compatible API did not start: {exc} (KVVIZ_API=0 turns it off)",
                  file=sys.stderr, flush=True)
            return None
        _STARTED["url"] = thread.url
        _STARTED["thread"] = thread
        _STARTED["app"] = app
        threading.Thread(target=_warm, args=(app,), daemon=True, name="kvviz-api warm-up").start()
        key = " (Authorization: Bearer KVVIZ_API_KEY)" if config.api_key else ""
        print(f"kvviz: OpenAI-compatible API on {thread.url}/v1{key}", file=sys.stderr, flush=True)
        return thread.url


def get_api_url() -> str | None:
    """The in-process API's URL if it runs (for the workshop checklist)."""
    return _STARTED.get("url")


def recent_requests() -> list[Any]:
    """The last finished API requests of the in-process API (``kvviz.server.serving.ApiRequest``, newest
    last): client label, prompt and cached tokens, for the room page and the engine view."""
    app = _STARTED.get("app")
    return list(app.state.serving.recent) if app is not None else []
