"""``GET /openapi.json``: FastAPI's own schema, with the request bodies the handlers read themselves
(kvviz.server.body validates them, so FastAPI cannot see them) added from the pydantic models.

Invariant: every POST route that reads a JSON body names its model here, so a schema-driven client (or
fuzzer) sees the fields the server validates.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

REF = "#/components/schemas/{model}"


def install(app: FastAPI, bodies: dict[str, list[type[BaseModel]]]) -> None:
    """Serve ``app``'s schema with ``bodies`` (path -> request models; several: any one of them)."""

    def schema() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        spec = get_openapi(title=app.title, version=app.version, routes=app.routes)
        models = [(m, "validation") for ms in bodies.values() for m in ms]
        refs, defs = models_json_schema(models, ref_template=REF)
        spec.setdefault("components", {}).setdefault("schemas", {}).update(defs.get("$defs", {}))
        for path, ms in bodies.items():
            post = spec.get("paths", {}).get(path, {}).get("post")
            if post is None:
                continue
            one = [refs[(m, "validation")] for m in ms]
            body = one[0] if len(one) == 1 else {"anyOf": one}
            post["requestBody"] = {"required": True, "content": {"application/json": {"schema": body}}}
        app.openapi_schema = spec
        return spec

    app.openapi = schema  # type: ignore[method-assign]
