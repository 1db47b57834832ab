"""Errors as vLLM's OpenAI server returns them: ``{"error": {"message", "type", "param", "code"}}``.

vLLM 0.33.0 (``vllm/entrypoints/serve/exception_handling/``) answers a validation error with 400 and
the field in ``param``, an unknown model with 404 ``NotFoundError``; kvviz adds 401 (API key), 403
(presenter key), 413 (body too large); a full waiting queue is 503 with ``Retry-After`` as vLLM's. Invariant: every
error a client causes is a 4xx JSON body and one log line at most, never a traceback.
"""

from __future__ import annotations

import contextlib
import logging
import re
from http import HTTPStatus
from typing import Any

from pydantic import ValidationError
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from kvviz.errors import CodedError
from kvviz.server.protocol import FieldError

log = logging.getLogger("kvviz.server")
MAX_REPORTED = 3
_FIELD = re.compile(r"[a-z_][a-z0-9_]*")
_TYPE_MARKERS = frozenset({"str", "int", "float", "bool", "list", "dict", "none"})


class APIError(Exception):
    """An HTTP error with the OpenAI error body; ``headers`` (e.g. Retry-After) go on the response."""

    def __init__(self, status: int, message: str, *, param: str | None = None, err_type: str | None = None,
                 headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.err_type = err_type or _default_type(status)
        self.headers = headers or {}

    def response(self) -> JSONResponse:
        return JSONResponse(error_body(self.message, self.err_type, self.status, self.param),
                            status_code=self.status, headers=self.headers)


def _default_type(status: int) -> str:
    return {400: "BadRequestError", 401: "AuthenticationError", 403: "PermissionDeniedError",
            404: "NotFoundError", 413: "BadRequestError", 429: "RateLimitError",
            503: "ServiceUnavailableError"}.get(status, HTTPStatus(status).phrase.replace(" ", "") + "Error")


def error_body(message: str, err_type: str, code: int, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": err_type, "param": param, "code": code}}


def bad_request(message: str, param: str | None = None) -> APIError:
    return APIError(400, message, param=param)


def _param(loc: tuple[Any, ...]) -> str | None:
    """``messages.0.content`` from pydantic's loc, without its union markers (``str``, ``list[int]``)."""
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(str(item))
        elif isinstance(item, str) and _FIELD.fullmatch(item) and item not in _TYPE_MARKERS:
            parts.append(item)
    return ".".join(parts) or None


def _field_error(err: dict[str, Any]) -> FieldError | None:
    ctx = err.get("ctx") or {}
    found = ctx.get("error")
    return found if isinstance(found, FieldError) else None


def from_validation(exc: ValidationError) -> APIError:
    """400 naming the first bad field; the message lists up to ``MAX_REPORTED`` distinct problems."""
    seen: dict[str | None, str] = {}
    for err in exc.errors(include_url=False, include_input=False):
        coded = _field_error(err)
        if coded is not None:
            seen.setdefault(coded.param, str(coded).split(": ", 1)[-1])
            continue
        param = _param(tuple(err.get("loc", ())))
        message = str(err.get("msg", "invalid value")).removeprefix("Value error, ")
        if err.get("type") == "extra_forbidden":
            message = "unknown field (kvviz refuses fields it would silently ignore)"
        seen.setdefault(param, message)
    items = list(seen.items())
    first = items[0][0] if items else None
    text = "; ".join(f"{p or 'body'}: {m}" for p, m in items[:MAX_REPORTED])
    if len(items) > MAX_REPORTED:
        text += f"; and {len(items) - MAX_REPORTED} more"
    return bad_request(text, first)


def from_coded(exc: CodedError, param: str | None = None) -> APIError:
    """A kvviz bad-input error (the engine's own checks) as a 400."""
    return APIError(400, str(exc), param=param, err_type="BadRequestError")


async def api_error_handler(_request: Any, exc: Exception) -> JSONResponse:
    assert isinstance(exc, APIError)
    return exc.response()


class LastResort:
    """ASGI middleware under Starlette's error middleware: a defect in a handler is one log line and a 500
    JSON body (or, once the response started, the end of that body), never re-raised, so neither Starlette
    nor uvicorn logs "Exception in ASGI application" with a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracked(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:  # noqa: BLE001 - the last line: every defect is answered here
            first = str(exc).splitlines()[0][:200] if str(exc) else ""
            log.error("kvviz server: %s %s failed: %s: %s", scope.get("method"), scope.get("path"),
                      type(exc).__name__, first)
            if not started:
                body = error_body("internal error in kvviz (see the server log)", "InternalServerError", 500)
                await JSONResponse(body, status_code=500)(scope, receive, send)
            else:
                with contextlib.suppress(Exception):  # the client may be gone already
                    await send({"type": "http.response.body", "body": b"", "more_body": False})


async def http_error_handler(_request: Any, exc: Exception) -> JSONResponse:
    """Starlette's own errors (404 unknown path, 405 wrong method) in the OpenAI shape."""
    status = int(getattr(exc, "status_code", 500))
    detail = getattr(exc, "detail", None) or HTTPStatus(status).phrase
    return JSONResponse(error_body(str(detail), _default_type(status), status), status_code=status,
                        headers=getattr(exc, "headers", None))
