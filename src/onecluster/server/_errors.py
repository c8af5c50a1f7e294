"""The one place that maps errors to HTTP responses.

:class:`PlatformError` → its ``status`` and ``{"error": {...}}``; a malformed request body or
query → 400 with the field at fault; anything unexpected → 500, logged with its traceback,
and the server carries on.  The OpenAPI document lists these answers on every operation
that can give them (:func:`document_errors`).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from onecluster.errors import PlatformError, ValidationError
from onecluster.schema import ErrorOut

__all__ = ["error_response", "install_error_handlers"]

_log = logging.getLogger("onecluster.server")


def error_response(error: PlatformError) -> JSONResponse:
    """The response for ``error``."""
    return JSONResponse({"error": error.to_dict()}, status_code=error.status)


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    async def platform(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, PlatformError)
        return error_response(exc)

    async def invalid(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(ValidationError(_describe(exc)))

    async def http(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "error")
        message = f"{exc.detail}" if exc.detail else "the request failed"
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            allowed = _allowed(request)
            headers["Allow"] = ", ".join(allowed)
            message = (
                f"{request.method} is not allowed on {request.url.path}; use {' or '.join(allowed)}"
            )
        return JSONResponse(
            {"error": {"code": code, "message": message}},
            status_code=exc.status_code,
            headers=headers,
        )

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        # Handled outside the app's middleware: the request id is read back from the
        # header RequestIds put in the request (_request_ids.py).
        request_id = request.headers.get("x-request-id")
        _log.error(
            "unexpected error in %s %s",
            request.method,
            request.url.path,
            exc_info=exc,
            extra={"request_id": request_id},
        )
        body = {
            "code": PlatformError.code,
            "message": f"the server met an unexpected {type(exc).__name__}; it is logged",
            "hint": "retry; if it persists, report it with the server log",
        }
        headers = {"x-request-id": request_id} if request_id else None
        return JSONResponse({"error": body}, status_code=500, headers=headers)

    app.add_exception_handler(PlatformError, platform)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http)
    app.add_exception_handler(Exception, unexpected)
    document_errors(app)


_METHODS = ("DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT")


def _allowed(request: Request) -> list[str]:
    """Every method some route takes on the request's path (Starlette names only the first
    route's, and ``GET /jobs`` and ``POST /jobs`` are two routes)."""
    routes = request.app.router.routes
    return [
        method
        for method in _METHODS
        if any(r.matches({**request.scope, "method": method})[0] is Match.FULL for r in routes)
    ]


def document_errors(app: FastAPI) -> None:
    """Make ``app``'s OpenAPI document list the error answers every operation may give, in
    the error schema: 400 for a malformed request (instead of FastAPI's 422 with its own
    schema), 401/403 where a token is read, 404 where a path names a thing (or a ``site`` or
    ``team`` query does), 413/415 where a body is taken, 503 while the server starts, 500.

    Answers an operation declares itself (``responses=``) are kept.
    """
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            _add_error_answers(generate())
        assert app.openapi_schema is not None
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


_ANSWERS = {
    "400": "The request is malformed: the message names the field at fault.",
    "401": "No token, or a token that is not valid.",
    "403": "The token's role, team or site may not do this.",
    "404": "A thing the request names does not exist.",
    "413": "The request body is over the route's size limit.",
    "415": "The request body is not JSON.",
    "500": "An unexpected error; it is logged.",
    "503": "The server is still starting.",
}


def _add_error_answers(schema: dict[str, Any]) -> None:
    error = ErrorOut.model_json_schema(ref_template="#/components/schemas/{model}")
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    for name, definition in error.pop("$defs", {}).items():
        components.setdefault(name, definition)
    components.setdefault("ErrorOut", error)
    content = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
    for path, operations in schema.get("paths", {}).items():
        for operation in operations.values():
            answers: dict[str, Any] = operation.setdefault("responses", {})
            default_422 = answers.get("422", {}).get("content", {}).get("application/json", {})
            if default_422.get("schema", {}).get("$ref", "").endswith("/HTTPValidationError"):
                del answers["422"]  # FastAPI's; this API answers malformed requests with 400
            params = operation.get("parameters", [])
            token = [p for p in params if p["in"] == "header" and p["name"] == "authorization"]
            body = "requestBody" in operation
            statuses = {"500"}
            if path.startswith("/api/"):
                statuses.add("503")
            if len(params) > len(token) or body:
                statuses.add("400")
            if token:
                statuses |= {"401", "403"}
            if any(p["in"] == "path" or p["name"] in {"site", "team"} for p in params):
                statuses.add("404")
            if body:
                statuses |= {"413", "415"}
            for status in sorted(statuses):
                answers.setdefault(status, {"description": _ANSWERS[status], "content": content})
    for unused in ("HTTPValidationError", "ValidationError"):
        components.pop(unused, None)


def _describe(exc: RequestValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        if error.get("type") == "json_invalid":  # its loc is a character position
            position = error.get("loc", ("body", "?"))[-1]
            problems.append(f"the body is not valid JSON (at character {position})")
            continue
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "the body"
        text = str(error.get("msg", "is not valid")).removeprefix("Value error, ")
        problems.append(f"{where}: {text}")
    return "the request is not valid: " + "; ".join(problems)
