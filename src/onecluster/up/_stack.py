"""Waiting until the agents of ``up`` have synced with its server."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from onecluster.errors import UnavailableError
from onecluster.launch import Launcher

if TYPE_CHECKING:
    from onecluster.client import Client

__all__ = ["wait_sites_up"]


def wait_sites_up(
    admin: Client,
    sites: Sequence[str],
    launcher: Launcher,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll ``/sites`` until every site in ``sites`` is ``up`` (its agent has synced);
    :class:`BackendError` if a process exits meanwhile, :class:`UnavailableError` after
    ``timeout_s``."""
    waiting = list(sites)

    def ready() -> bool:
        status = {s.name: s.status for s in admin.sites()}
        waiting[:] = [s for s in sites if status.get(s) != "up"]
        return not waiting

    def failure() -> UnavailableError:
        msg = f"the agents of {', '.join(waiting)} did not sync within {timeout_s:.0f} s"
        logs = ", ".join(str(c.log_path) for c in launcher.children if c.name.startswith("agent-"))
        return UnavailableError(msg, hint=f"see the agents' logs: {logs}")

    launcher.wait_until(ready, timeout_s=timeout_s, failure=failure, clock=clock)
