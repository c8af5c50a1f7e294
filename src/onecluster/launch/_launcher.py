"""The launcher: the one place that starts, watches and stops the stack's processes (the
server, the agents, the lab's link emulators) for ``onecluster up`` and ``onecluster lab``.

Each process leads a session of its own (:class:`onecluster.process.Child`) with its output
appended to a log file.  A process started by this launcher is stopped through its
:class:`~onecluster.process.Child`, whose unreaped zombie pins its PID; one started by an
earlier command (the lab's outlive the command that made them, their PIDs kept in the lab's
state file) is stopped only if :meth:`Launcher.owns` it still: a live ``python -m
onecluster…`` whose command line names the launcher's *marker* (a directory).  Never by name.
Stopping is SIGTERM to the process group, SIGKILL after a grace, then SIGKILL for every
descendant that outlived it (an agent's jobs run in sessions of their own).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from onecluster.errors import BackendError, PlatformError
from onecluster.process import Child, alive, cmdline, pids, stop_pids

__all__ = ["Launched", "Launcher", "StopReport", "log_tail"]

_POLL_S = 0.1


@dataclass(frozen=True, slots=True, kw_only=True)
class Launched:
    """A process the launcher started: its name (``server``, ``agent-tokyo``), PID and log."""

    name: str
    pid: int
    log_path: Path


@dataclass(frozen=True, slots=True, kw_only=True)
class StopReport:
    """What a stop did: the processes stopped, in order, and the PIDs of any process that was
    still alive after SIGKILL (normally none; one stuck in the kernel, say)."""

    stopped: tuple[Launched, ...]
    survivors: tuple[int, ...]


class Launcher:
    """The processes of one stack, logged to ``log_dir/<name>.log`` unless told otherwise.

    ``grace_s`` is how long a process gets between SIGTERM and SIGKILL.  ``marker`` (a
    directory that every command line of the stack names, with a trailing ``/``) lets
    :meth:`owns` recognise the stack's processes started by an earlier command.  Used as a
    context manager, leaving the block stops every process it started; otherwise they
    outlive it.  Not thread-safe.
    """

    def __init__(self, log_dir: Path, *, grace_s: float = 10.0, marker: str | None = None) -> None:
        self._log_dir = log_dir
        self._grace_s = grace_s
        self._marker = marker
        self._started: list[tuple[Launched, Child]] = []

    def __enter__(self) -> Launcher:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()

    @property
    def children(self) -> tuple[Launched, ...]:
        """The processes started (and not yet stopped or reaped), in order."""
        return tuple(launched for launched, _ in self._started)

    # -- starting ---------------------------------------------------------------------------

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        log_path: Path | None = None,
    ) -> Launched:
        """Start ``argv`` as ``name`` in a session of its own, stdout and stderr appended to
        ``log_path`` (default ``<log_dir>/<name>.log``); ``env=None`` passes ours on.

        Raises :class:`BackendError` if the program cannot be started.
        """
        log = log_path or self._log_dir / f"{name}.log"
        try:
            child = Child.spawn(argv, log_path=log, env=env)
        except (OSError, ValueError) as exc:
            msg = f"could not start {name} ({argv[0]}): {exc}"
            raise BackendError(msg, hint="check that the program exists and can run") from exc
        launched = Launched(name=name, pid=child.pid, log_path=log)
        self._started.append((launched, child))
        return launched

    # -- watching ---------------------------------------------------------------------------

    def exited(self) -> list[tuple[Launched, int]]:
        """The processes that have exited on their own, with their exit status (what was
        left of their process group is killed)."""
        return [
            (launched, code)
            for launched, child in self._started
            if (code := child.exit_code()) is not None
        ]

    def check(self, *, ignore: Collection[str] = ()) -> None:
        """:class:`BackendError` naming the first process that has exited, with its log's
        tail; those named in ``ignore`` may exit (server replicas of which others serve on:
        the caller watches them)."""
        for launched, code in self.exited():
            if launched.name in ignore:
                continue
            msg = f"{launched.name} (pid {launched.pid}) exited with status {code}"
            raise BackendError(
                msg,
                hint=f"its log {launched.log_path} ends with:\n{log_tail(launched.log_path)}",
            )

    def wait_until(
        self,
        ready: Callable[[], bool],
        *,
        timeout_s: float,
        failure: Callable[[], PlatformError],
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Poll ``ready`` until it is true, checking meanwhile that no process has exited
        (:meth:`check`); raises ``failure()`` once ``timeout_s`` of ``clock`` have passed."""
        deadline = clock() + timeout_s
        while True:
            self.check()
            if ready():
                return
            if clock() > deadline:
                raise failure()
            time.sleep(_POLL_S)

    def reap(self) -> None:
        """Forget the processes that have exited (collecting their status), so none is left
        a zombie."""
        self._started = [(p, c) for p, c in self._started if c.exit_code() is None]

    # -- stopping ---------------------------------------------------------------------------

    def stop_all(self) -> StopReport:
        """Stop every process started, the last started first (agents before their server).
        Idempotent."""
        stopped: list[Launched] = []
        survivors: list[int] = []
        while self._started:
            launched, child = self._started.pop()
            if not child.stop(self._grace_s):
                survivors.append(launched.pid)
            stopped.append(launched)
        return StopReport(stopped=tuple(stopped), survivors=tuple(survivors))

    def owns(self, pid: int) -> bool:
        """Whether live ``pid`` is one of this stack's processes: ``python -m onecluster…``
        with the marker in its command line — so an operator's ``tail -f`` of one of the
        stack's logs, say, is never taken for one.  False without a marker."""
        if self._marker is None or not alive(pid):
            return False
        argv = cmdline(pid)
        module = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == b"-m"), b"")
        marker = self._marker.encode()
        return module.startswith(b"onecluster.") and any(marker in a for a in argv)

    def own_processes(self) -> list[int]:
        """Every live process that :meth:`owns` (never this one), wherever it came from."""
        return [pid for pid in pids() if pid != os.getpid() and self.owns(pid)]

    def stop_owned(
        self, candidates: Iterable[int], *, grace_s: float
    ) -> tuple[list[int], list[int]]:
        """Stop those of ``candidates`` that this launcher :meth:`owns` (they may have been
        started by an earlier command), as :meth:`stop_all` does; ``(stopped, survivors)``."""
        owned = sorted({pid for pid in candidates if self.owns(pid)})
        survivors = stop_pids(owned, grace_s=grace_s, groups=True)
        self.reap()
        return owned, survivors


def log_tail(path: Path, lines: int = 15) -> str:
    """The last ``lines`` of a log file, for error hints."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty)"
