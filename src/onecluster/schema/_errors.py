"""The error body every route answers with when it fails."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["ErrorDetail", "ErrorOut"]


class ErrorDetail(BaseModel):
    """``code`` is stable (see :mod:`onecluster.errors`); ``message`` is a full sentence."""

    code: str
    message: str
    hint: str | None = None


class ErrorOut(BaseModel):
    """``{"error": {"code": ..., "message": ..., "hint": ...}}``."""

    error: ErrorDetail
