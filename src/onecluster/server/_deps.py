"""Request dependencies: the control plane and the authenticated caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from onecluster.errors import UnavailableError
from onecluster.server._auth import Principal
from onecluster.server._control import ControlPlane
from onecluster.server._submissions import SubmissionWriter

__all__ = ["Caller", "Control", "Submissions"]


# Both dependencies are ``async``: a plain ``def`` would cost every request two hops through
# the thread pool.  Token look-ups hit the authenticator's cache; a miss reads one row.


async def _control(request: Request) -> ControlPlane:
    control = getattr(request.app.state, "control", None)
    if not isinstance(control, ControlPlane):
        msg = "the server is still starting"
        raise UnavailableError(msg, hint="retry in a moment")
    return control


async def _caller(
    control: Annotated[ControlPlane, Depends(_control)],
    authorization: Annotated[str | None, Header()] = None,
) -> Principal:
    return control.auth.principal(authorization)


async def _submissions(request: Request) -> SubmissionWriter:
    writer = getattr(request.app.state, "submissions", None)
    if not isinstance(writer, SubmissionWriter):
        msg = "the server is still starting"
        raise UnavailableError(msg, hint="retry in a moment")
    return writer


Control = Annotated[ControlPlane, Depends(_control)]
Submissions = Annotated[SubmissionWriter, Depends(_submissions)]
Caller = Annotated[Principal, Depends(_caller)]
