"""The one place that maps errors to HTTP responses.

:class:`PlatformError` → its ``status`` and ``{"error": {...}}``; a malformed request body or
query → 400 with the field at fault; anything unexpected → 500, logged with its traceback,
and the server carries on.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from onecluster.errors import PlatformError, ValidationError

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

    async def http(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "error")
        message = f"{exc.detail}" if exc.detail else "the request failed"
        return JSONResponse(
            {"error": {"code": code, "message": message}}, status_code=exc.status_code
        )

    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        _log.error("unexpected error in %s %s", request.method, request.url.path, exc_info=exc)
        body = {
            "code": PlatformError.code,
            "message": f"the server met an unexpected {type(exc).__name__}; it is logged",
            "hint": "retry; if it persists, report it with the server log",
        }
        return JSONResponse({"error": body}, status_code=500)

    app.add_exception_handler(PlatformError, platform)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(StarletteHTTPException, http)
    app.add_exception_handler(Exception, unexpected)


def _describe(exc: RequestValidationError) -> str:
    problems = []
    for error in exc.errors()[:5]:
        where = ".".join(str(p) for p in error.get("loc", ()) if p != "body") or "the body"
        problems.append(f"{where}: {error.get('msg', 'is not valid')}")
    return "the request is not valid: " + "; ".join(problems)
