"""Starting the stack's server and agents through a :class:`Launcher` — the same way for
``onecluster up`` and ``onecluster lab``: ``python -m onecluster.cli`` with the right flags,
the agent's token in its environment, and a server that counts as started once it answers
``/healthz``.
"""

from __future__ import annotations

import os
import secrets
import socket
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from onecluster.client import Client
from onecluster.errors import UnavailableError
from onecluster.launch._launcher import Launched, Launcher, log_tail
from onecluster.schema import TokenCreate
from onecluster.state_dir import ADMIN_TOKEN_FILE, SERVER_URL_FILE

__all__ = [
    "ADMIN_TOKEN_FILE",
    "SERVER_URL_FILE",
    "StartedServer",
    "admin_token",
    "deid_key_file",
    "free_port",
    "start_agent",
    "start_server",
    "wait_server",
]

#: Files in a server's state directory for the CLI to find (see ``docs/cli.md``): the
#: bootstrap admin token (written by the server) and the URL of the running server.


@dataclass(frozen=True, slots=True, kw_only=True)
class StartedServer:
    """A server process, where it listens and its state directory."""

    process: Launched
    url: str
    state_dir: Path


def free_port(host: str, *, preferred: int | None = None) -> int:
    """``preferred`` if it is free on ``host``, else a port the kernel picks."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        if preferred is not None:
            try:
                s.bind((host, preferred))
            except OSError:
                pass
            else:
                return preferred
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        port: int = s.getsockname()[1]
        return port


def _cli(python: str, *args: str) -> list[str]:
    return [python, "-m", "onecluster.cli", *args]


def start_server(
    launcher: Launcher,
    *,
    python: str,
    state_dir: Path,
    fabric: Path,
    host: str,
    port: int,
    env: Mapping[str, str] | None = None,
    extra: Sequence[str] = (),
    name: str = "server",
) -> StartedServer:
    """Start ``onecluster server`` as ``name`` on ``host:port`` with its state (SQLite, admin
    token) in ``state_dir`` and ``extra`` flags (``--relay-share 1``, say);
    :func:`wait_server` waits until it answers."""
    argv = _cli(
        python, "--state-dir", str(state_dir), "server",
        "--fabric", str(fabric), "--host", host, "--port", str(port), *extra,
    )  # fmt: skip
    process = launcher.start(name, argv, env=env)
    return StartedServer(process=process, url=f"http://{host}:{port}", state_dir=state_dir)


def wait_server(launcher: Launcher, server: StartedServer, *, timeout_s: float) -> None:
    """Until ``/healthz`` answers (the server then has written ``server.url``);
    :class:`BackendError` if a process of the stack exits meanwhile, :class:`UnavailableError`
    after ``timeout_s``."""

    def failure() -> UnavailableError:
        msg = f"the server did not answer at {server.url} within {timeout_s:.0f} s"
        log = server.process.log_path
        return UnavailableError(msg, hint=f"its log {log} ends with:\n{log_tail(log)}")

    with Client(server.url, timeout=2.0) as anonymous:
        launcher.wait_until(lambda: _answers(anonymous), timeout_s=timeout_s, failure=failure)


def _answers(client: Client) -> bool:
    try:
        client.health()
    except UnavailableError:
        return False
    return True


def admin_token(state_dir: Path) -> str:
    """The bootstrap admin token a server wrote into ``state_dir``."""
    return (state_dir / ADMIN_TOKEN_FILE).read_text(encoding="utf-8").strip()


def start_agent(
    launcher: Launcher,
    admin: Client,
    *,
    python: str,
    site: str,
    fabric: Path,
    work_dir: Path,
    env: Mapping[str, str],
    extra: Sequence[str] = (),
    wrap: Callable[[list[str]], list[str]] | None = None,
) -> Launched:
    """Mint an agent token for ``site`` and start ``onecluster agent`` for it as
    ``agent-<site>``, syncing with every server ``admin`` names (replicas: it fails over
    between them), with ``extra`` flags, its command line passed through ``wrap`` (to run
    it in a network namespace, say).  The token goes in its environment (``env`` plus
    ``ONECLUSTER_TOKEN``), not on the command line, where any local user could read it.
    The site's de-identification key for exports is ``<work_dir>/deid.key``, made (random,
    0600) on the first start and kept, so its pseudonyms stay the same across restarts."""
    token = admin.create_token(TokenCreate(role="agent", site=site)).token
    key = deid_key_file(work_dir)
    argv = _cli(
        python, "--server", str(admin.servers), "agent", "--site", site,
        "--fabric", str(fabric), "--work-dir", str(work_dir), "--deid-key-file", str(key),
        *extra,
    )  # fmt: skip
    return launcher.start(
        f"agent-{site}", wrap(argv) if wrap else argv, env={**env, "ONECLUSTER_TOKEN": token}
    )


def deid_key_file(work_dir: Path) -> Path:
    """``<work_dir>/deid.key``: 32 random bytes (hex), made once, readable by its owner only."""
    key = work_dir / "deid.key"
    if not key.exists():
        work_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(secrets.token_hex(32) + "\n")
    return key
