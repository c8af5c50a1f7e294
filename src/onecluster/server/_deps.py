"""Request dependencies: the control plane and the authenticated caller."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from onecluster.errors import UnavailableError
from onecluster.server._auth import Principal
from onecluster.server._control import ControlPlane

__all__ = ["Caller", "Control"]


def _control(request: Request) -> ControlPlane:
    control = getattr(request.app.state, "control", None)
    if not isinstance(control, ControlPlane):
        msg = "the server is still starting"
        raise UnavailableError(msg, hint="retry in a moment")
    return control


def _caller(
    control: Annotated[ControlPlane, Depends(_control)],
    authorization: Annotated[str | None, Header()] = None,
) -> Principal:
    return control.auth.principal(authorization)


Control = Annotated[ControlPlane, Depends(_control)]
Caller = Annotated[Principal, Depends(_caller)]
