"""Error bodies back to the :mod:`onecluster.errors` class with the same ``code``."""

from __future__ import annotations

import httpx

from onecluster import errors
from onecluster.errors import PlatformError

__all__ = ["error_from_response"]


def _classes() -> dict[str, type[PlatformError]]:
    found: dict[str, type[PlatformError]] = {}
    todo: list[type[PlatformError]] = [PlatformError]
    while todo:
        cls = todo.pop()
        found.setdefault(cls.code, cls)
        todo.extend(cls.__subclasses__())
    return found


def error_from_response(response: httpx.Response) -> PlatformError:
    """The exception a failed response stands for.

    A body in the API's error schema maps to the class of its ``code`` (unknown codes fall
    back to the class matching the status, then :class:`PlatformError`); any other body
    becomes a :class:`PlatformError` quoting the status.
    """
    try:
        body = response.json()
        detail = body["error"]
        code, message = str(detail["code"]), str(detail["message"])
        hint = detail.get("hint")
    except (ValueError, KeyError, TypeError):
        text = response.text.strip()[:200] or response.reason_phrase
        msg = f"the server answered {response.status_code}: {text}"
        return _by_status(response.status_code)(msg)
    cls = _classes().get(code) or _by_status(response.status_code)
    return cls(message, hint=None if hint is None else str(hint))


def _by_status(status: int) -> type[PlatformError]:
    by_status = {
        400: errors.ValidationError,
        401: errors.AuthError,
        403: errors.ForbiddenError,
        404: errors.NotFoundError,
        409: errors.ConflictError,
        422: errors.ImpossibleJobError,
        502: errors.BackendError,
        503: errors.UnavailableError,
    }
    return by_status.get(status, PlatformError)
