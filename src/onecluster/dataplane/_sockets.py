"""Socket set-up for bulk data: BBR, a priority class, and the window the kernel allows.

Buffers are left to the kernel's autotuning (setting ``SO_SNDBUF`` would switch it off and
cap the window at ``net.core.wmem_max``); the window a stream can reach is the maximum of
``net.ipv4.tcp_rmem``, which :func:`window_bytes` reads so that a path gets enough streams.
"""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

__all__ = ["DSCP", "connect", "tune", "window_bytes"]

#: DiffServ code points by priority class, in the TOS byte: bulk sync is *lower effort*
#: (RFC 8622's LE, below best effort), a job's prefetch is best effort.  Routers that honour
#: DSCP keep training and inference traffic ahead of both.
DSCP = {"bulk": 0x01 << 2, "prefetch": 0x00}
_TCP_RMEM = Path("/proc/sys/net/ipv4/tcp_rmem")
_DEFAULT_WINDOW = 6 * 1024 * 1024


def tune(sock: socket.socket, *, priority: str = "bulk") -> None:
    """BBR where the kernel has it, the class's DSCP, no Nagle delay for requests."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    with contextlib.suppress(OSError):  # no BBR module: the kernel's default stays
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, b"bbr")
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, DSCP.get(priority, 0))


def connect(address: str, port: int, *, timeout_s: float, priority: str = "bulk") -> socket.socket:
    """A tuned TCP connection (raises :class:`OSError` when it cannot be made)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        tune(sock, priority=priority)
        sock.settimeout(timeout_s)
        sock.connect((address, port))
    except BaseException:
        sock.close()
        raise
    return sock


def window_bytes() -> int:
    """The largest receive window the kernel autotunes a stream to."""
    try:
        return int(_TCP_RMEM.read_text().split()[2])
    except (OSError, ValueError, IndexError):
        return _DEFAULT_WINDOW
