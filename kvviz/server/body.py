"""The one reader of a request body: bounded bytes, UTF-8 JSON, an object, then the pydantic model.

Invariant: nothing past ``limit`` bytes is read (413 at once when Content-Length says so); every way a
body can be wrong (binary, not JSON, not an object, a field of the wrong type) is an ``APIError``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from kvviz.server.openai_errors import APIError, bad_request, from_validation

M = TypeVar("M", bound=BaseModel)


async def read_bytes(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise APIError(413, f"the request body has {int(declared):,} bytes (at most {limit:,})")
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise APIError(413, f"the request body is over {limit:,} bytes")
            chunks.append(chunk)
    except ClientDisconnect:  # the client hung up mid-body: nobody reads the answer, nothing to log
        raise APIError(400, f"the client closed the connection after {size:,} bytes of its body") from None
    return b"".join(chunks)


def parse_json(raw: bytes) -> dict[str, Any]:
    if not raw.strip():
        raise bad_request("the request body is empty: send a JSON object")
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise bad_request(f"the request body is not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise bad_request(f"the request body is not JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise bad_request("the request body is nested too deeply") from None
    except ValueError:  # the only other ValueError json raises: Python's int() limit (sys.get_int_max_str_digits)
        raise bad_request(f"the request body has an integer of more than {sys.get_int_max_str_digits():,} "
                          f"digits") from None
    if not isinstance(obj, dict):
        raise bad_request(f"the request body must be a JSON object, not {type(obj).__name__}")
    return obj


async def read_model(request: Request, model: type[M] | Callable[[dict[str, Any]], type[M]], limit: int) -> M:
    """The validated request model of ``request``'s body (``model`` a type, or a function that picks the
    type from the JSON object, for a union such as vLLM's tokenize request)."""
    obj = parse_json(await read_bytes(request, limit))
    if not isinstance(model, type):
        model = model(obj)
    try:
        return model.model_validate(obj)
    except ValidationError as exc:
        raise from_validation(exc) from None
