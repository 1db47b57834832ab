"""The HTTP routes, following vLLM 0.33.0's OpenAI server: ``/v1/completions``, ``/v1/chat/completions``
(``stream: true`` as server-sent events ending in ``data: [DONE]``), ``/v1/models``, ``/health`` and
``/ping``, ``/version``, ``/tokenize`` and ``/detokenize``, ``/metrics`` and ``/reset_prefix_cache``
(presenter key). Every handler validates its body once
(kvviz.server.body) and leaves the engine to kvviz.server.serving.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, Depends
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from kvviz import __version__ as kvviz_version
from kvviz.errors import CodedError
from kvviz.server import responses as R
from kvviz.server import tokenize as T
from kvviz.server.body import read_model
from kvviz.server.chat_template import encode_prompt, render_chat
from kvviz.server.metrics import CONTENT_TYPE, ServerMetrics
from kvviz.server.openai_errors import APIError, from_coded
from kvviz.server.protocol import DEFAULT_CHAT_MAX_TOKENS, ChatCompletionRequest, CompletionRequest, _Sampling
from kvviz.server.serving import Job, Serving, new_request_id

if TYPE_CHECKING:  # types only: the engine (torch) is imported when the first request needs it
    from kvviz.engine import RequestOutput, SamplingParams

PRESENTER_HEADER = "x-presenter-key"
CLIENT_HEADER = "x-kvviz-client"
ParamsFactory = Callable[..., "SamplingParams"]


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

    def _params(self, req: _Sampling, max_tokens: int, child: int = 0) -> SamplingParams:
        try:
            return self._make(req, max_tokens, child)
        except CodedError as exc:  # the engine's own sampling checks
            raise from_coded(exc) from None

    def _make(self, req: _Sampling, max_tokens: int, child: int) -> SamplingParams:
        seed = req.real_seed()  # child i of n draws with seed + i, as vLLM 0.33.0's parallel sampling
        return self.make_params(max_tokens=max_tokens, temperature=1.0 if req.temperature is None else req.temperature,
                                top_p=1.0 if req.top_p is None else req.top_p,
                                seed=None if seed is None else seed + child, stop=req.stop_strings(),
                                ignore_eos=req.ignore_eos, logprobs=req.num_logprobs,
                                stop_token_ids=tuple(req.stop_token_ids or ()))

    async def _jobs(self, request: Request, req: _Sampling, prompts: list[list[int]], requested: int | None,
                    default_cap: int, prefix: str, param: str) -> tuple[str, list[Job]]:
        """The response id and one engine request per choice: n children per prompt, named as vLLM names
        them (``{i}_{parent}``), so the n share the prompt's full blocks through the prefix cache."""
        base, n, jobs = new_request_id(prefix), req.num_choices, []
        for p_index, prompt_ids in enumerate(prompts):
            max_tokens = requested if requested is not None else self.serving.default_max_tokens(prompt_ids,
                                                                                                 default_cap)
            self.serving.check_tokens(prompt_ids, max_tokens, param)
            parent = base if len(prompts) == 1 else f"{base}-{p_index}"
            for child in range(n):
                jobs.append(Job(parent if n == 1 else f"{child}_{parent}", prompt_ids,
                                self._params(req, max_tokens, child), req.cache_salt, req.priority,
                                self._client(request, req)))
        return base, jobs

    async def _engine_ready(self) -> None:
        if not self.serving.started:  # loading the model takes seconds: not on the event loop
            await asyncio.to_thread(lambda: self.serving.loop)

    # ------------------------------------------------------------------ endpoints
    async def health(self) -> Response:
        return Response(status_code=200)

    async def version(self) -> JSONResponse:
        """vLLM's ``/version`` shape; the version is kvviz's own."""
        return JSONResponse({"version": kvviz_version})

    async def tokenize(self, request: Request) -> JSONResponse:
        req = await read_model(request, T.tokenize_model, self.config.max_body_bytes)
        self._model(req.model)
        await self._engine_ready()
        return JSONResponse(T.tokenize(self.serving.tokenizer, req, self.serving.max_model_len))

    async def detokenize(self, request: Request) -> JSONResponse:
        req = await read_model(request, T.DetokenizeRequest, self.config.max_body_bytes)
        self._model(req.model)
        await self._engine_ready()
        return JSONResponse(T.detokenize(self.serving.tokenizer, req))

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
        tok = self.serving.tokenizer
        prompts = req.prompts()
        prompt_ids = [encode_prompt(tok, p) for p in prompts]
        rid, jobs = await self._jobs(request, req, prompt_ids, req.max_tokens, req.max_tokens or 16, "cmpl", "prompt")
        n, k, created = req.num_choices, req.logprobs, int(time.time())
        echo = [p if isinstance(p, str) else tok.decode(ids) for p, ids in zip(prompts, prompt_ids, strict=True)] \
            if req.echo else None
        if not req.stream:
            outs = await self.serving.complete_many(jobs, request)

            def choice(index: int, out: RequestOutput) -> tuple[str, Any]:
                logprobs = None if k is None else R.completion_logprobs(tok, out.logprobs or [], k, 0)
                return (echo[index // n] if echo else "") + out.text, logprobs

            return JSONResponse(R.completion(rid, model, created, outs, n, choice))
        offsets, echoed, finals = [0] * len(jobs), [False] * len(jobs), {}

        def chunks(index: int, out: RequestOutput) -> list[str]:
            text = out.delta_text
            if echo and not echoed[index]:
                text, echoed[index] = echo[index // n] + text, True
            logprobs = None
            if k is not None:
                logprobs = R.completion_logprobs(tok, R.new_entries(out), k, offsets[index])
                if logprobs["tokens"]:  # the next chunk's offsets go on after this chunk's tokens
                    offsets[index] = logprobs["text_offset"][-1] + len(logprobs["tokens"][-1])
            items = [R.sse(R.completion_chunk(rid, model, created, out, req.continuous_usage, index, text, logprobs))]
            return items + self._usage_tail(rid, model, created, "text_completion", req, finals, index, out, len(jobs))

        return await self._sse(jobs, request, chunks, [])

    async def chat_completions(self, request: Request) -> Response:
        req = await read_model(request, ChatCompletionRequest, self.config.max_body_bytes)
        model = self._model(req.model)
        await self._engine_ready()
        tok = self.serving.tokenizer
        prompt_ids = render_chat(tok, req.messages)
        rid, jobs = await self._jobs(request, req, [prompt_ids], req.requested_max_tokens(), DEFAULT_CHAT_MAX_TOKENS,
                                     "chatcmpl", "messages")
        n, created = req.num_choices, int(time.time())
        top = req.top_logprobs or 0

        def logprobs_of(entries: list[Any] | None) -> Any:
            return R.chat_logprobs(tok, entries or [], top) if req.logprobs else None

        if not req.stream:
            outs = await self.serving.complete_many(jobs, request)
            return JSONResponse(R.chat(rid, model, created, outs, n, lambda out: logprobs_of(out.logprobs)))
        finals: dict[int, RequestOutput] = {}

        def chunks(index: int, out: RequestOutput) -> list[str]:
            usage_of = out if req.continuous_usage else None
            delta = {"content": out.delta_text} if out.delta_text or not out.finished else {}
            items = [R.sse(R.chat_chunk(rid, model, created, delta, out.finish_reason if out.finished else None,
                                        usage_of, index, logprobs_of(R.new_entries(out)),
                                        out.stop_reason if out.finished else None))]
            return items + self._usage_tail(rid, model, created, "chat.completion.chunk", req, finals, index, out,
                                            len(jobs))

        roles = [R.sse(R.chat_chunk(rid, model, created, {"role": "assistant", "content": ""}, None, index=i))
                 for i in range(len(jobs))]
        return await self._sse(jobs, request, chunks, roles)

    @staticmethod
    def _usage_tail(rid: str, model: str, created: int, obj: str, req: _Sampling, finals: dict[int, RequestOutput],
                    index: int, out: RequestOutput, count: int) -> list[str]:
        """The usage chunk after the last choice finishes, when ``stream_options.include_usage``."""
        if out.finished:
            finals[index] = out
        if not (out.finished and req.include_usage and len(finals) == count):
            return []
        outs = [finals[i] for i in range(count)]
        return [R.sse(R.usage_chunk(rid, model, created, obj, outs, req.num_choices))]

    async def _sse(self, jobs: list[Job], request: Request, chunks: Callable[[int, Any], list[str]],
                   head: list[str]) -> StreamingResponse:
        """Server-sent events of ``jobs``; errors before the first output (503 queue full, bad prompt) are HTTP errors."""
        outputs = self.serving.stream_many(jobs, request)
        first = await outputs.__anext__()  # raises APIError before any byte is sent

        async def body() -> AsyncIterator[str]:
            try:
                for item in head + chunks(*first):
                    yield item
                async for index, out in outputs:
                    for item in chunks(index, out):
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
    for method in ("GET", "POST"):  # vLLM's alias of /health, on both methods
        router.add_api_route("/ping", routes.health, methods=[method], operation_id=f"ping_{method.lower()}")
    router.add_api_route("/version", routes.version, methods=["GET"])
    router.add_api_route("/tokenize", routes.tokenize, methods=["POST"])
    router.add_api_route("/detokenize", routes.detokenize, methods=["POST"])
    router.add_api_route("/metrics", routes.metrics_text, methods=["GET"])
    router.add_api_route("/reset_prefix_cache", routes.reset_prefix_cache, methods=["POST"])
    v1.add_api_route("/models", routes.models, methods=["GET"])
    v1.add_api_route("/completions", routes.completions, methods=["POST"])
    v1.add_api_route("/chat/completions", routes.chat_completions, methods=["POST"])
    router.include_router(v1)
    return router
