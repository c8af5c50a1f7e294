"""Request dependencies: the control plane and the authenticated caller."""

from __future__ import annotations

import asyncio
from typing import Annotated, TypeVar

from fastapi import Depends, Header, Request

from onecluster.errors import UnavailableError
from onecluster.server._auth import Principal
from onecluster.server._control import ControlPlane
from onecluster.server._election import Election
from onecluster.server._submissions import SubmissionWriter

__all__ = ["Caller", "Control", "Elected", "Submissions", "principal_of"]

T = TypeVar("T")


# The dependencies are ``async``: a plain ``def`` would cost every request two hops through
# the thread pool.


def _running(request: Request, name: str, kind: type[T]) -> T:
    """``app.state.<name>``, which the lifespan sets while the app runs; 503 before that."""
    found = getattr(request.app.state, name, None)
    if not isinstance(found, kind):
        msg = "the server is still starting"
        raise UnavailableError(msg, hint="retry in a moment")
    return found


async def _control(request: Request) -> ControlPlane:
    return _running(request, "control", ControlPlane)


async def _caller(
    control: Annotated[ControlPlane, Depends(_control)],
    authorization: Annotated[str | None, Header()] = None,
) -> Principal:
    # A cached token is answered on the loop; a miss (or a bad token) reads the database in
    # a worker thread, so a slow database or a flood of bad tokens never stalls other requests.
    found = control.auth.cached(authorization)
    if found is not None:
        return found
    return await asyncio.to_thread(control.auth.principal, authorization)


async def principal_of(request: Request) -> Principal:
    """The caller of ``request``, outside FastAPI's dependency injection (for routes that
    authenticate before anything else)."""
    return await _caller(await _control(request), request.headers.get("authorization"))


async def _submissions(request: Request) -> SubmissionWriter:
    return _running(request, "submissions", SubmissionWriter)


async def _election(request: Request) -> Election:
    return _running(request, "election", Election)


Control = Annotated[ControlPlane, Depends(_control)]
Elected = Annotated[Election, Depends(_election)]
Submissions = Annotated[SubmissionWriter, Depends(_submissions)]
Caller = Annotated[Principal, Depends(_caller)]
