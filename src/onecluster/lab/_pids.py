"""The lab's processes, found and stopped by PID — and only if the PID is still one of ours
(its command line names the lab's directory), never by name."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from onecluster.errors import BackendError

__all__ = ["alive", "ours", "spawn", "stop_pids", "tail"]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    fields = text[text.rfind(")") + 2 :].split()
    return bool(fields) and fields[0] not in {"Z", "X"}


def ours(pid: int, marker: str) -> bool:
    """Whether live ``pid`` is one of the lab's own processes: ``python -m onecluster…`` with
    ``marker`` (the lab's directory) in its command line — so an operator's ``tail -f`` of a
    lab log, say, is never taken for one."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    module = next((argv[i + 1] for i, a in enumerate(argv[:-1]) if a == b"-m"), b"")
    return (
        alive(pid) and module.startswith(b"onecluster.") and any(marker.encode() in a for a in argv)
    )


def spawn(
    argv: Sequence[str], log: Path, *, env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """Start ``argv`` in a session of its own, output appended to ``log``; it outlives the
    caller.  :class:`BackendError` if it cannot be started."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        try:
            return subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=env,
            )
        except OSError as exc:
            msg = f"cannot start {argv[0]}: {exc}"
            raise BackendError(msg) from exc


def stop_pids(pids: Sequence[int], *, grace_s: float, sig: signal.Signals = signal.SIGTERM) -> None:
    """Send ``sig`` to each PID, wait up to ``grace_s`` for them to end, then SIGKILL.

    A child of this process that ended stays a zombie until its ``Popen`` is collected;
    :func:`alive` counts zombies as ended, so nothing here waits on them."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)
    for pid in pids:
        if alive(pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while time.monotonic() < deadline and any(alive(p) for p in pids):
        time.sleep(0.05)


def tail(path: Path, lines: int = 12) -> str:
    """The last ``lines`` of a log file, for error hints."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read {path}: {exc})"
    return "\n".join(text.rstrip().splitlines()[-lines:]) or "(empty)"
