"""Child processes that ``onecluster up`` owns: started in their own process group, logged to a
file, and always stopped by PID — never by name — when ``up`` ends, however it ends."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from onecluster.errors import BackendError

__all__ = ["ChildProcess", "ProcessSet", "descendants_of"]


@dataclass(frozen=True, slots=True)
class ChildProcess:
    """A started child: its name (``server``, ``agent-tokyo``), PID and log file."""

    name: str
    pid: int
    log_path: Path


class ProcessSet:
    """The processes ``up`` started, stopped in reverse order of starting.

    Each child is the leader of a new session (``start_new_session``), so stopping it
    signals its whole process group — the jobs an agent ran as its own children included.
    Use as a context manager; leaving the block stops every child (SIGTERM, then SIGKILL
    after ``grace_s``).
    """

    def __init__(self, log_dir: Path, *, grace_s: float = 10.0) -> None:
        self._log_dir = log_dir
        self._grace_s = grace_s
        self._children: list[tuple[ChildProcess, subprocess.Popen[bytes]]] = []

    def __enter__(self) -> ProcessSet:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop_all()

    @property
    def children(self) -> tuple[ChildProcess, ...]:
        """The children started so far, in order."""
        return tuple(child for child, _ in self._children)

    def start(
        self, name: str, argv: Sequence[str], *, env: dict[str, str] | None = None
    ) -> ChildProcess:
        """Start ``argv`` as child ``name``, stdout and stderr appended to ``<log_dir>/<name>.log``.

        Raises :class:`BackendError` if the program cannot be started.
        """
        self._log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self._log_dir / f"{name}.log"
        with log_path.open("ab") as log:
            try:
                popen = subprocess.Popen(
                    list(argv),
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    env=env,
                )
            except OSError as exc:
                msg = f"could not start {name} ({argv[0]}): {exc}"
                raise BackendError(msg) from exc
        child = ChildProcess(name=name, pid=popen.pid, log_path=log_path)
        self._children.append((child, popen))
        return child

    def exited(self) -> list[tuple[ChildProcess, int]]:
        """Children that have exited on their own, with their exit status."""
        return [
            (child, code) for child, popen in self._children if (code := popen.poll()) is not None
        ]

    def stop_all(self) -> list[ChildProcess]:
        """Stop every child, last started first; returns those stopped.  Idempotent."""
        stopped: list[ChildProcess] = []
        while self._children:
            child, popen = self._children.pop()
            _stop(popen, self._grace_s)
            stopped.append(child)
        return stopped


def _stop(popen: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the child's process group, wait ``grace_s``, then SIGKILL it; then SIGKILL, by
    PID, every descendant seen before the stop that outlived it (an agent's jobs run in their
    own sessions, so they are not in the agent's group)."""
    descendants = descendants_of(popen.pid)
    _signal_group(popen.pid, signal.SIGTERM)
    try:
        popen.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        _signal_group(popen.pid, signal.SIGKILL)
        popen.wait()
    _signal_group(popen.pid, signal.SIGKILL)
    for pid in descendants:
        _signal_pid(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and (
        _group_alive(popen.pid) or any(_pid_alive(p) for p in descendants)
    ):
        time.sleep(0.05)


def descendants_of(pid: int) -> set[int]:
    """PIDs of every live descendant of ``pid`` (children, grandchildren …), read from /proc.

    Zombies count as dead.  On a system without /proc the set is empty.
    """
    children: dict[int, list[int]] = {}
    for entry in _proc_entries():
        stat = _read_stat(entry)
        if stat is not None:
            children.setdefault(stat[1], []).append(stat[0])
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _proc_entries() -> list[Path]:
    try:
        return [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    except OSError:
        return []


def _read_stat(entry: Path) -> tuple[int, int] | None:
    """``(pid, ppid)`` of a live, non-zombie process, or ``None``."""
    try:
        text = (entry / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # the command name is in parentheses and may itself contain spaces or parentheses
    fields = text[text.rfind(")") + 2 :].split()
    if len(fields) < 2 or fields[0] in {"Z", "X"}:
        return None
    return int(entry.name), int(fields[1])


def _pid_alive(pid: int) -> bool:
    return _read_stat(Path("/proc") / str(pid)) is not None


def _signal_pid(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, sig)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True
