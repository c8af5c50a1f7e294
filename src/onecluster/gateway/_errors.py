"""The gateway's errors, in onecluster's tree, and their OpenAI-format bodies.

Clients use OpenAI's SDKs, which pick an exception class from the HTTP status (401
``AuthenticationError``, 403 ``PermissionDeniedError``, 404 ``NotFoundError``, 409
``ConflictError``, 429 ``RateLimitError``, 400 ``BadRequestError``, 5xx
``InternalServerError``), so every error has the status a client expects and a body
``{"error": {"message", "type", "param", "code"}}`` whose ``code`` is stable.
"""

from __future__ import annotations

import orjson

from onecluster.errors import (
    AuthError,
    BackendError,
    ConflictError,
    ForbiddenError,
    NotFoundError,
    PlatformError,
    ValidationError,
)

__all__ = [
    "GatewayRateLimitError",
    "UpstreamError",
    "UpstreamTimeoutError",
    "error_body",
    "openai_type",
]


class GatewayRateLimitError(PlatformError):
    """Over a tier's limit; ``retry_after`` seconds opens the next window."""

    code = "rate_limited"
    status = 429
    exit_code = 8

    def __init__(self, message: str, *, retry_after: int, limit: str, scope: str) -> None:
        super().__init__(message, hint=f"retry after {retry_after} s")
        self.retry_after = retry_after
        self.limit = limit
        self.scope = scope


class UpstreamError(BackendError):
    """Every deployment of the model failed before answering; nothing was charged."""

    code = "upstream_failed"


class UpstreamTimeoutError(UpstreamError):
    """The upstream did not answer within its timeout; nothing was charged."""

    code = "upstream_timeout"
    status = 504


_TYPES: dict[type[PlatformError], str] = {
    AuthError: "authentication_error",
    ForbiddenError: "permission_error",
    NotFoundError: "invalid_request_error",
    ConflictError: "invalid_request_error",
    ValidationError: "invalid_request_error",
    GatewayRateLimitError: "rate_limit_error",
    UpstreamError: "upstream_error",
}


def openai_type(error: PlatformError) -> str:
    """OpenAI's ``error.type`` for ``error`` (the nearest class in the tree)."""
    for cls in type(error).__mro__:
        found = _TYPES.get(cls)
        if found is not None:
            return found
    return "server_error"


def error_body(error: PlatformError, *, param: str | None = None) -> bytes:
    """The JSON body of ``error`` in OpenAI's format (the hint joins the message)."""
    message = error.message if not error.hint else f"{error.message} ({error.hint})"
    return orjson.dumps(
        {
            "error": {
                "message": message,
                "type": openai_type(error),
                "param": param,
                "code": error.code,
            }
        }
    )
