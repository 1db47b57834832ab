"""The HTTP routes, following vLLM 0.33.0's OpenAI server: ``/v1/completions``, ``/v1/chat/completions``
(``stream: true`` as server-sent events ending in ``data: [DONE]``), ``/v1/models``, ``/health``,
``/metrics`` and ``/reset_prefix_cache`` (presenter key). Every handler validates its body once
(kvviz.server.body) and leaves the engine to kvviz.server.serving.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

from fastapi import APIRouter, Depends
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from kvviz.mirror.errors import CodedError
from kvviz.server import responses as R
from kvviz.server.body import read_model
from kvviz.server.chat import encode_prompt, render_chat
from kvviz.server.errors import APIError, from_coded
from kvviz.server.metrics import CONTENT_TYPE, ServerMetrics
from kvviz.server.protocol import DEFAULT_CHAT_MAX_TOKENS, ChatCompletionRequest, CompletionRequest, _Sampling
from kvviz.server.serving import Job, Serving, new_request_id

PRESENTER_HEADER = "x-presenter-key"
CLIENT_HEADER = "x-kvviz-client"
ParamsFactory = Callable[..., Any]


class Routes:
    """The handlers of one app, bound to its serving bridge, metrics and sampling-params type."""

    def __init__(self, serving: Serving, metrics: ServerMetrics, make_params: ParamsFactory) -> None:
        self.serving = serving
        self.metrics = metrics
        self.make_params = make_params
        self.config = serving.config

    # ------------------------------------------------------------------ keys
    def require_api_key(self, request: Request) -> None:
        key = self.config.api_key
        if key is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not secrets.compare_digest(token.strip().encode(), key.encode()):
            raise APIError(401, "missing or wrong API key: send 'Authorization: Bearer <key>'",
                           headers={"WWW-Authenticate": "Bearer"})

    def require_presenter_key(self, request: Request) -> None:
        key = self.config.presenter_key
        given = request.headers.get(PRESENTER_HEADER, "")
        if not key:
            raise APIError(403, "this server has no presenter key, so nobody may reset its prefix cache")
        if not given:
            raise APIError(401, f"resetting the prefix cache needs the presenter key in the {PRESENTER_HEADER} header")
        if not secrets.compare_digest(given.strip().encode(), key.encode()):
            raise APIError(403, "wrong presenter key")

    # ------------------------------------------------------------------ helpers
    def _model(self, name: str | None) -> str:
        if not self.config.knows_model(name):
            raise APIError(404, f"the model '{(name or '')[:100]}' does not exist here (this server runs "
                           f"'{self.config.model_name}')", param="model")
        return self.config.model_name

    @staticmethod
    def _client(request: Request, req: _Sampling) -> str:
        label = req.user or request.headers.get(CLIENT_HEADER, "").strip()[:64]
        if label:
            return label
        host = request.client.host if request.client else "?"
        return f"api {host}"

    def _params(self, req: _Sampling, max_tokens: int) -> Any:
        try:
            return self._make(req, max_tokens)
        except CodedError as exc:  # the engine's own sampling checks
            raise from_coded(exc) from None

    def _make(self, req: _Sampling, max_tokens: int) -> Any:
        return self.make_params(max_tokens=max_tokens, temperature=1.0 if req.temperature is None else req.temperature,
                                top_p=1.0 if req.top_p is None else req.top_p, seed=req.seed,
                                stop=req.stop_strings(), ignore_eos=req.ignore_eos)

    async def _job(self, request: Request, req: _Sampling, prompt_ids: list[int], requested: int | None,
                   default_cap: int, prefix: str, param: str) -> Job:
        max_tokens = requested if requested is not None else self.serving.default_max_tokens(prompt_ids, default_cap)
        self.serving.check_tokens(prompt_ids, max_tokens, param)
        return Job(new_request_id(prefix), prompt_ids, self._params(req, max_tokens), req.cache_salt,
                   req.priority, self._client(request, req))

    async def _engine_ready(self) -> None:
        if not self.serving.started:  # loading the model takes seconds: not on the event loop
            await asyncio.to_thread(lambda: self.serving.loop)

    # ------------------------------------------------------------------ endpoints
    async def health(self) -> Response:
        return Response(status_code=200)

    async def models(self) -> JSONResponse:
        length = self.serving.max_model_len if self.serving.started else None
        return JSONResponse(R.models(self.config.model_name, length))

    async def metrics_text(self) -> Response:
        body = await asyncio.to_thread(self.metrics.render)  # the engine's stats wait for a running step
        return Response(body, media_type=CONTENT_TYPE)

    async def reset_prefix_cache(self, request: Request) -> JSONResponse:
        self.require_presenter_key(request)
        await self._engine_ready()
        done = await asyncio.to_thread(self.serving.reset_prefix_cache)
        return JSONResponse({"reset": bool(done)})

    async def completions(self, request: Request) -> Response:
        req = await read_model(request, CompletionRequest, self.config.max_body_bytes)
        model = self._model(req.model)
        await self._engine_ready()
        prompt_ids = encode_prompt(self.serving.tokenizer, req.prompt)
        job = await self._job(request, req, prompt_ids, req.max_tokens, req.max_tokens or 16, "cmpl", "prompt")
        created = int(time.time())
        if not req.stream:
            out = await self.serving.complete(job, request)
            return JSONResponse(R.completion(job.request_id, model, created, out))

        def chunks(out: Any) -> list[str]:
            items = [R.sse(R.completion_chunk(job.request_id, model, created, out, req.continuous_usage))]
            if out.finished and req.include_usage:
                items.append(R.sse(R.usage_chunk(job.request_id, model, created, "text_completion", out)))
            return items

        return await self._sse(job, request, chunks, [])

    async def chat_completions(self, request: Request) -> Response:
        req = await read_model(request, ChatCompletionRequest, self.config.max_body_bytes)
        model = self._model(req.model)
        await self._engine_ready()
        prompt_ids = render_chat(self.serving.tokenizer, req.messages)
        job = await self._job(request, req, prompt_ids, req.requested_max_tokens(), DEFAULT_CHAT_MAX_TOKENS,
                              "chatcmpl", "messages")
        created = int(time.time())
        if not req.stream:
            out = await self.serving.complete(job, request)
            return JSONResponse(R.chat(job.request_id, model, created, out))

        def chunks(out: Any) -> list[str]:
            usage_of = out if req.continuous_usage else None
            delta = {"content": out.delta_text} if out.delta_text or not out.finished else {}
            items = [R.sse(R.chat_chunk(job.request_id, model, created, delta,
                                        out.finish_reason if out.finished else None, usage_of))]
            if out.finished and req.include_usage:
                items.append(R.sse(R.usage_chunk(job.request_id, model, created, "chat.completion.chunk", out)))
            return items

        role = R.sse(R.chat_chunk(job.request_id, model, created, {"role": "assistant", "content": ""}, None))
        return await self._sse(job, request, chunks, [role])

    async def _sse(self, job: Job, request: Request, chunks: Callable[[Any], list[str]],
                   head: list[str]) -> StreamingResponse:
        """Server-sent events of ``job``; errors before the first output (429, bad prompt) are HTTP errors."""
        outputs = self.serving.stream(job, request)
        first = await outputs.__anext__()  # raises APIError before any byte is sent

        async def body() -> AsyncIterator[str]:
            try:
                for item in head + chunks(first):
                    yield item
                if not first.finished:
                    async for out in outputs:
                        for item in chunks(out):
                            yield item
                yield R.DONE
            finally:
                await outputs.aclose()

        return StreamingResponse(body(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def build_router(routes: Routes) -> APIRouter:
    router = APIRouter()
    v1 = APIRouter(prefix="/v1", dependencies=[Depends(routes.require_api_key)])
    router.add_api_route("/health", routes.health, methods=["GET"])
    router.add_api_route("/metrics", routes.metrics_text, methods=["GET"])
    router.add_api_route("/reset_prefix_cache", routes.reset_prefix_cache, methods=["POST"])
    v1.add_api_route("/models", routes.models, methods=["GET"])
    v1.add_api_route("/completions", routes.completions, methods=["POST"])
    v1.add_api_route("/chat/completions", routes.chat_completions, methods=["POST"])
    router.include_router(v1)
    return router
