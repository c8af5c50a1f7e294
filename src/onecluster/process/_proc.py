"""What ``/proc`` says about processes: whether one runs, its descendants, the members of a
process group, its command line and environment.

A zombie (a process that has ended but not been reaped) counts as ended everywhere here, but
only once all its threads have: the main thread of a threaded process shows as a zombie while
its other threads are still exiting, and until they are gone its parent cannot reap it.
Where ``/proc`` does not exist every answer is empty.
"""

from __future__ import annotations

from pathlib import Path

__all__ = ["alive", "cmdline", "descendants", "environ", "group_members", "leads_group", "pids"]

_PROC = Path("/proc")
_ENDED = frozenset({"Z", "X"})


def pids() -> list[int]:
    """Every process id in ``/proc`` (live or not)."""
    try:
        return [int(p.name) for p in _PROC.iterdir() if p.name.isdigit()]
    except OSError:
        return []


def _stat(pid: int) -> tuple[str, int, int] | None:
    """``(state, ppid, pgrp)`` of ``pid``, or ``None`` if it cannot be read."""
    try:
        text = (_PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    # The command name, field 2, is in parentheses and may itself hold spaces or parentheses.
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return fields[0], int(fields[1]), int(fields[2])
    except (IndexError, ValueError):
        return None


def _running(pid: int, state: str) -> bool:
    """Whether a process whose main thread is in ``state`` still runs (a thread of it does)."""
    if state not in _ENDED:
        return True
    try:
        tasks = list((_PROC / str(pid) / "task").iterdir())
    except OSError:
        return False
    for task in tasks:
        try:
            text = (task / "stat").read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if text[text.rfind(")") + 2 :][:1] not in _ENDED:
            return True
    return False


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie is not)."""
    stat = _stat(pid)
    return stat is not None and _running(pid, stat[0])


def leads_group(pid: int) -> bool:
    """Whether ``pid`` (live or a zombie) is the leader of its process group."""
    stat = _stat(pid)
    return stat is not None and stat[2] == pid


def _live() -> list[tuple[int, int, int]]:
    """``(pid, ppid, pgrp)`` of every live process."""
    found = []
    for pid in pids():
        stat = _stat(pid)
        if stat is not None and _running(pid, stat[0]):
            found.append((pid, stat[1], stat[2]))
    return found


def descendants(pid: int) -> set[int]:
    """Every live descendant of ``pid``: children, grandchildren …, wherever their session."""
    children: dict[int, list[int]] = {}
    for child, parent, _ in _live():
        children.setdefault(parent, []).append(child)
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def group_members(pgid: int) -> list[int]:
    """The live processes of process group ``pgid``."""
    return [pid for pid, _, pgrp in _live() if pgrp == pgid]


def cmdline(pid: int) -> list[bytes]:
    """The command line of ``pid``, one item per argument; empty if it cannot be read."""
    return _nul_list(_PROC / str(pid) / "cmdline")


def environ(pid: int) -> list[bytes]:
    """The environment of ``pid`` (``NAME=value`` items); empty if it cannot be read."""
    return _nul_list(_PROC / str(pid) / "environ")


def _nul_list(path: Path) -> list[bytes]:
    try:
        data = path.read_bytes()
    except OSError:
        return []
    if not data:
        return []
    return data.removesuffix(b"\0").split(b"\0")
