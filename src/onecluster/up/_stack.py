"""Starting the server and the agents of ``up`` and waiting until they are ready."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from onecluster.errors import BackendError, UnavailableError
from onecluster.up._processes import ProcessSet

if TYPE_CHECKING:
    from onecluster.client import Client

__all__ = ["check_children", "choose_port", "wait_healthy", "wait_sites_up", "write_secret"]

_POLL_S = 0.2


def choose_port(host: str, wanted: int | None, *, preferred: int = 8080) -> int:
    """``wanted`` if given; else ``preferred`` if it is free on ``host``; else a free port."""
    if wanted is not None:
        return wanted
    if _free(host, preferred):
        return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def check_children(processes: ProcessSet) -> None:
    """Raise :class:`BackendError` naming the first child that has exited, with its log's tail."""
    for child, code in processes.exited():
        msg = f"{child.name} (pid {child.pid}) exited with status {code}"
        raise BackendError(
            msg, hint=f"its log {child.log_path} ends with:\n{_tail(child.log_path)}"
        )


def wait_healthy(
    client: Client,
    url: str,
    processes: ProcessSet,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll ``/healthz`` until it answers; :class:`UnavailableError` after ``timeout_s``."""
    deadline = clock() + timeout_s
    while True:
        check_children(processes)
        try:
            client.health()
        except UnavailableError:
            pass
        else:
            return
        if clock() > deadline:
            msg = f"the server did not answer at {url} within {timeout_s:.0f} s"
            raise UnavailableError(msg, hint="see the server log in the state directory")
        time.sleep(_POLL_S)


def wait_sites_up(
    admin: Client,
    sites: Sequence[str],
    processes: ProcessSet,
    *,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
) -> None:
    """Poll ``/sites`` until every site in ``sites`` is ``up`` (its agent has synced)."""
    deadline = clock() + timeout_s
    while True:
        check_children(processes)
        status = {s.name: s.status for s in admin.sites()}
        waiting = [s for s in sites if status.get(s) != "up"]
        if not waiting:
            return
        if clock() > deadline:
            msg = f"the agents of {', '.join(waiting)} did not sync within {timeout_s:.0f} s"
            raise UnavailableError(msg, hint="see the agents' logs in the state directory")
        time.sleep(_POLL_S)


def write_secret(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` readable by the owner only."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text + "\n")


def _free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read it: {exc})"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty)"
