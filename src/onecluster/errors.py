"""The one exception tree of onecluster.

::

    PlatformError                      code="error"            exit 1   HTTP 500
    ├── ValidationError                code="invalid"          exit 2   HTTP 400/422
    │   ├── FabricError                code="fabric_invalid"   exit 2   HTTP 400
    │   ├── TraceError                 code="trace_invalid"    exit 2   HTTP 400
    │   ├── ImpossibleJobError         code="job_impossible"   exit 2   HTTP 422
    │   ├── TooLargeError              code="too_large"        exit 2   HTTP 413
    │   └── UnsupportedMediaError      code="unsupported_media" exit 2  HTTP 415
    ├── NotFoundError                  code="not_found"        exit 3   HTTP 404
    ├── ConflictError                  code="conflict"         exit 4   HTTP 409
    ├── AuthError                      code="unauthorized"     exit 5   HTTP 401
    │   └── ForbiddenError             code="forbidden"        exit 5   HTTP 403
    ├── UnavailableError               code="unavailable"      exit 6   HTTP 503
    ├── BackendError                   code="backend_failed"   exit 7   HTTP 502
    ├── IntegrityError                 code="integrity"        exit 10  HTTP 422
    └── StorageError                   code="storage"          exit 11  HTTP 507

Every class carries a stable ``code`` (part of the API's error schema, never a class name), an
HTTP ``status`` and a CLI ``exit_code``.  Messages are full sentences that say what went wrong
and, where one exists, a ``hint`` says what to do next.  Third-party errors are translated at
the adapter that met them (``raise … from exc``); the API and the CLI map this tree to
statuses and exit codes in one place each (``server`` and ``cli._errors``).
"""

from __future__ import annotations

from typing import ClassVar

__all__ = [
    "AuthError",
    "BackendError",
    "ConflictError",
    "FabricError",
    "ForbiddenError",
    "ImpossibleJobError",
    "IntegrityError",
    "NotFoundError",
    "NotLeaderError",
    "PlatformError",
    "StorageError",
    "TooLargeError",
    "TraceError",
    "UnavailableError",
    "UnsupportedMediaError",
    "ValidationError",
]


class PlatformError(Exception):
    """Root of every error onecluster raises on purpose."""

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 500
    exit_code: ClassVar[int] = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def to_dict(self) -> dict[str, str]:
        """The error as the API's JSON error body."""
        body = {"code": self.code, "message": self.message}
        if self.hint:
            body["hint"] = self.hint
        return body


class ValidationError(PlatformError):
    """Input that cannot be accepted as given; nothing was changed."""

    code = "invalid"
    status = 400
    exit_code = 2


class FabricError(ValidationError):
    """A fabric file that is malformed or inconsistent; the message names the line.

    ``subject`` (e.g. ``"circuit:sha-sin-a"``) names the declaration at fault so the file
    loader can point at its line.
    """

    code = "fabric_invalid"

    def __init__(self, message: str, *, hint: str | None = None, subject: str | None = None):
        super().__init__(message, hint=hint)
        self.subject = subject


class TraceError(ValidationError):
    """A workload trace that cannot be read; the message names the line."""

    code = "trace_invalid"


class ImpossibleJobError(ValidationError):
    """A job that no site of the fabric could ever run (too many GPUs, unknown type or team)."""

    code = "job_impossible"
    status = 422


class TooLargeError(ValidationError):
    """A request body over the route's size limit; nothing was read past the limit."""

    code = "too_large"
    status = 413


class UnsupportedMediaError(ValidationError):
    """A request body that is not JSON (the API takes nothing else)."""

    code = "unsupported_media"
    status = 415


class NotFoundError(PlatformError):
    """A named thing (job, site, team) does not exist."""

    code = "not_found"
    status = 404
    exit_code = 3


class ConflictError(PlatformError):
    """The request contradicts the current state (e.g. cancelling a finished job)."""

    code = "conflict"
    status = 409
    exit_code = 4


class AuthError(PlatformError):
    """No token, or a token that is not valid."""

    code = "unauthorized"
    status = 401
    exit_code = 5


class ForbiddenError(AuthError):
    """A valid token whose role may not do this."""

    code = "forbidden"
    status = 403


class UnavailableError(PlatformError):
    """A service that is needed is down or unreachable; retrying later may succeed."""

    code = "unavailable"
    status = 503
    exit_code = 6


class NotLeaderError(UnavailableError):
    """A server replica that no longer leads tried leader-only work (the database refused
    it), or asked who leads while nobody does; another replica leads or soon will."""

    code = "not_leader"


class BackendError(PlatformError):
    """A cluster backend (local processes, Slurm, Kubernetes) failed underneath us."""

    code = "backend_failed"
    status = 502
    exit_code = 7


class IntegrityError(PlatformError):
    """Data that is not what its digest or root says: a corrupt chunk or manifest, a file
    that changed at its source after it was scanned.  Nothing unverified is ever kept."""

    code = "integrity"
    status = 422
    exit_code = 10


class StorageError(PlatformError):
    """A site's storage cannot take what is asked of it: the disk is full, a directory cannot
    be written.  What was written and verified before is kept, so the work resumes once
    there is room."""

    code = "storage"
    status = 507
    exit_code = 11
