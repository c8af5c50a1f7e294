"""A bounded set of open files shared by threads, and flushing a file system to disk.

A version may have far more files than a process may hold open (100,000 images against a
limit of 1,024 or 20,000), so readers and writers keep only the most recently used ones open.
A file evicted while a thread uses it is closed by that thread when it is done, never under
it: its descriptor number would go to the next file opened, and the thread would read or
write another file's bytes.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator

__all__ = ["OpenFiles", "sync_filesystem"]


class OpenFiles:
    """At most ``limit`` files open at once, opened by ``opener(path)`` as needed (thread-safe)."""

    def __init__(self, opener: Callable[[str], int], *, limit: int = 64) -> None:
        self._opener = opener
        self._limit = limit
        self._lock = threading.Lock()
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._users: dict[int, int] = {}
        self._retired: set[int] = set()

    @contextlib.contextmanager
    def use(self, path: str) -> Iterator[int]:
        """An open descriptor of ``path`` for the duration of the block (:class:`OSError`
        when it cannot be opened)."""
        fd = self._acquire(path)
        try:
            yield fd
        finally:
            self._release(fd)

    def close(self) -> None:
        """Close every file (those in use as their users finish); later uses open again."""
        with self._lock:
            fds, self._fds = list(self._fds.values()), OrderedDict()
            for fd in fds:
                self._retire(fd)

    def _acquire(self, path: str) -> int:
        with self._lock:
            fd = self._fds.pop(path, None)
            if fd is None:
                fd = self._opener(path)
                if len(self._fds) >= self._limit:
                    _, oldest = self._fds.popitem(last=False)
                    self._retire(oldest)
            self._fds[path] = fd
            self._users[fd] = self._users.get(fd, 0) + 1
            return fd

    def _release(self, fd: int) -> None:
        with self._lock:
            self._users[fd] -= 1
            if self._users[fd] == 0:
                del self._users[fd]
                if fd in self._retired:
                    self._retired.discard(fd)
                    os.close(fd)

    def _retire(self, fd: int) -> None:
        """Close ``fd`` now, or when its last user is done (the lock is held)."""
        if self._users.get(fd):
            self._retired.add(fd)
        else:
            os.close(fd)


def _libc_syncfs() -> Callable[[int], int] | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        function: Callable[[int], int] = libc.syncfs
    except (OSError, AttributeError):
        return None
    return function


_SYNCFS = _libc_syncfs()


def sync_filesystem(directory_fd: int) -> None:
    """Flush every written byte of the file system holding ``directory_fd`` to disk — one
    call for any number of files (Linux ``syncfs``; elsewhere ``sync``).  :class:`OSError`
    when the disk reports an error."""
    if _SYNCFS is None:
        os.sync()
        return
    if _SYNCFS(directory_fd) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))
