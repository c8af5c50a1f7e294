"""Run the API under uvicorn (used by ``onecluster server``).

While it serves, the server holds ``<state-dir>/server.lock`` (an advisory ``flock``, let go
by the kernel however the process ends) and keeps ``<state-dir>/server.url``: the URL it
listens on, written once it accepts connections and removed when it stops cleanly, so that
the CLI run from the same folder finds it without ``--server``.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import logging
import os
import socket
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import uvicorn

from onecluster.clock import Clock, SystemClock
from onecluster.errors import ConflictError, UnavailableError, ValidationError
from onecluster.logs import LOG_LEVELS
from onecluster.server._app import create_app
from onecluster.server._config import ServerConfig
from onecluster.server._control import ControlPlane
from onecluster.state_dir import SERVER_URL_FILE
from onecluster.store import make_engine

__all__ = ["SERVER_URL_FILE", "serve"]

#: In the state directory: the URL of the server that runs on it.
_LOCK_FILE = "server.lock"
_log = logging.getLogger("uvicorn.error")  # where uvicorn says that it is running


def serve(config: ServerConfig, *, clock: Clock | None = None) -> None:
    """Serve until interrupted (SIGINT/SIGTERM stop it cleanly).

    Everything that can be wrong with the configuration is checked before uvicorn starts —
    the log level, the database URL (a SQLite file's folder must exist), the port, the
    state folder (no other server may be using it: :class:`ConflictError`) and the database
    (opened and migrated once) — so a mistake is one clear :mod:`onecluster.errors` error,
    not a lifespan traceback.  Nothing is created before the port is known to be free.
    """
    if config.log_level not in LOG_LEVELS:
        msg = f"unknown log level {config.log_level!r}; use one of {', '.join(LOG_LEVELS)}"
        raise ValidationError(msg)
    if config.db_url is not None:
        make_engine(config.db_url).dispose()  # refuses a bad URL or a missing folder
    the_clock: Clock = clock if clock is not None else SystemClock()
    with _bound(config.host, config.port) as sock, _state_dir_lock(config.state_dir):
        try:
            ControlPlane.open(config, the_clock).close()
        except OSError as exc:
            raise _unusable(config.state_dir, exc) from exc
        _serve_on(sock, config, the_clock)


def _serve_on(sock: socket.socket, config: ServerConfig, clock: Clock) -> None:
    url = _url_of(config.host, sock.getsockname()[1])
    if config.advertise_url is None:  # where other replicas reach this one, should it lead
        config = replace(config, advertise_url=url)
        if config.db_url is not None and _on_loopback(url):
            _log.warning(
                "this server tells the other replicas on its database to reach it at %s; "
                "replicas on other hosts cannot: give it --advertise-url",
                url,
            )
    app = create_app(config, clock=clock)
    server = _Server(
        uvicorn.Config(
            app,
            log_level=config.log_level,
            # uvicorn's own records go to the root logger's one handler, in the process's
            # format (onecluster.logs); the access lines are RequestIds', with the id.
            log_config=None,
            access_log=False,
        ),
        url=url,
        url_file=config.state_dir / SERVER_URL_FILE,
        closing=app.state.closing,
    )
    server.run(sockets=[sock])


class _Server(uvicorn.Server):
    """uvicorn's server, which writes ``url`` to ``url_file`` once it listens and removes it
    as it starts to shut down (before the signal that stopped it is re-raised); it sets
    ``closing`` then too, which ends the streams that would otherwise keep it waiting."""

    def __init__(
        self, config: uvicorn.Config, *, url: str, url_file: Path, closing: asyncio.Event
    ) -> None:
        super().__init__(config)
        self._url = url
        self._url_file = url_file
        self._closing = closing

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            _write_atomically(self._url_file, self._url + "\n")
            _log.info("onecluster is listening on %s (%s)", self._url, self._url_file)

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        _remove_if_ours(self._url_file, self._url)
        self._closing.set()
        await super().shutdown(sockets)


@contextlib.contextmanager
def _bound(host: str, port: int) -> Iterator[socket.socket]:
    """A socket bound to ``host:port`` (``port`` 0: any free one), closed afterwards.

    :class:`UnavailableError` if the port is in use, :class:`ValidationError` if the address
    cannot be listened on.
    """
    sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                msg = f"port {port} on {host} is already in use"
                raise UnavailableError(msg, hint="stop what uses it, or pass --port") from exc
            msg = f"cannot listen on {host}:{port}: {exc.strerror or exc}"
            raise ValidationError(msg, hint="check --host and --port") from exc
        yield sock
    finally:
        sock.close()


@contextlib.contextmanager
def _state_dir_lock(state_dir: Path) -> Iterator[None]:
    """Hold ``<state_dir>/server.lock``; :class:`ConflictError` if another server holds it.

    Two servers on one state folder would share its SQLite database and its ``server.url``.
    The lock file stays behind (empty of meaning once unlocked): removing it would let two
    servers that race to start both believe they hold it.
    """
    try:
        state_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(state_dir / _LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError as exc:
        raise _unusable(state_dir, exc) from exc
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            other = _read(state_dir / SERVER_URL_FILE)
            where = f" (it listens on {other})" if other else ""
            msg = f"another onecluster server is using the state folder {state_dir}{where}"
            raise ConflictError(
                msg, hint="stop it first, or give this one its own --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield
    finally:
        os.close(fd)


def _unusable(state_dir: Path, exc: OSError) -> ValidationError:
    msg = f"the state folder {state_dir} cannot be used: {exc.strerror or exc}"
    return ValidationError(msg, hint="pass --state-dir with a folder you can write")


def _on_loopback(url: str) -> bool:
    host = url.split("://", 1)[-1].rsplit(":", 1)[0].strip("[]")
    return host in ("127.0.0.1", "::1", "localhost")


def _url_of(host: str, port: int) -> str:
    """The URL a client on this host uses: a wildcard address is reached on loopback."""
    reachable = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(host, host)  # noqa: S104
    shown = f"[{reachable}]" if ":" in reachable else reachable
    return f"http://{shown}:{port}"


def _write_atomically(path: Path, text: str) -> None:
    scratch = path.with_name(path.name + ".tmp")
    scratch.write_text(text, encoding="utf-8")
    scratch.replace(path)


def _remove_if_ours(path: Path, url: str) -> None:
    if _read(path) == url:
        path.unlink(missing_ok=True)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None
