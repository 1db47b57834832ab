"""The app factory: one FastAPI app over one engine loop, its metrics, its keys and its KV-event publisher.

``create_app`` never loads the model: ``get_loop`` is called at the first request that needs the engine
(``python -m kvviz serve`` calls it before listening, so its first request is fast).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from fastapi import FastAPI
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException

from kvviz import __version__ as kvviz_version
from kvviz.server import openapi
from kvviz.server.config import ServerConfig
from kvviz.server.kv_publisher import KVEventPublisher
from kvviz.server.metrics import ServerMetrics
from kvviz.server.openai_errors import (
    APIError,
    LastResort,
    api_error_handler,
    bad_request,
    http_error_handler,
)
from kvviz.server.protocol import ChatCompletionRequest, CompletionRequest
from kvviz.server.routes import Routes, build_router
from kvviz.server.serving import Serving
from kvviz.server.tokenize import DetokenizeRequest, TokenizeChatRequest, TokenizeCompletionRequest

if TYPE_CHECKING:  # types only: the engine (torch) is imported when the first request needs it
    from kvviz.engine import EngineLoop, SamplingParams


def engine_params(**kwargs: Any) -> SamplingParams:
    """kvviz.engine's SamplingParams (imported when the first request is built: torch is not needed before)."""
    from kvviz.engine import SamplingParams

    return SamplingParams(**kwargs)


def create_app(get_loop: Callable[[], EngineLoop], config: ServerConfig, *,
               make_params: Callable[..., SamplingParams] = engine_params,
               publisher: KVEventPublisher | None = None) -> FastAPI:
    """The API app; ``publisher`` (already bound) receives the engine's KV events once the engine exists."""
    serving = Serving(get_loop, config)
    metrics = ServerMetrics(lambda: serving.loop.stats() if serving.started else None, config.model_name)
    serving.on_rejected.append(metrics.rejected.inc)
    serving.on_request_finished.append(metrics.observe_api_request)
    unsubscribe: list[Callable[[], None]] = []
    serving.on_started.append(lambda loop: unsubscribe.append(metrics.attach(loop)))
    if publisher is not None:
        serving.on_started.append(lambda loop: unsubscribe.append(loop.engine.subscribe_kv_events(publisher.publish)))

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI) -> AsyncIterator[None]:
        if publisher is not None:
            publisher.start()
        try:
            yield
        finally:
            for undo in unsubscribe:
                undo()
            if publisher is not None:
                publisher.stop()

    app = FastAPI(title="kvviz", version=kvviz_version, lifespan=lifespan, docs_url=None, redoc_url=None,
                  openapi_url="/openapi.json")
    openapi.install(app, {"/v1/completions": [CompletionRequest], "/v1/chat/completions": [ChatCompletionRequest],
                          "/tokenize": [TokenizeCompletionRequest, TokenizeChatRequest],
                          "/detokenize": [DetokenizeRequest]})
    routes = Routes(serving, metrics, make_params)
    app.include_router(build_router(routes))
    app.add_exception_handler(APIError, api_error_handler)
    app.add_exception_handler(HTTPException, http_error_handler)
    app.add_exception_handler(RequestValidationError,
                              lambda r, e: api_error_handler(r, bad_request("the request is malformed")))
    app.add_middleware(LastResort)  # defects: one log line and a 500, never a traceback
    app.state.serving = serving
    app.state.metrics = metrics
    app.state.publisher = publisher
    return app
