"""What the control-plane benchmarks (``bench_failover.py``, ``bench_outage.py``) share:
a free loopback port, and ``onecluster`` CLI processes each in a session of its own,
logging to a file."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spawn_cli(
    log: Path, argv: list[str], env: dict[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``python -m onecluster.cli ARGV`` in a new session (its group can be signalled
    whole), its stdout and stderr appended to ``log``."""
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "onecluster.cli", *argv],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
