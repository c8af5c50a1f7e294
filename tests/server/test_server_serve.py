"""``serve`` checks its configuration before uvicorn starts: one clear error, nothing half-up."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.errors import UnavailableError, ValidationError
from onecluster.fabric import load_fabric
from onecluster.server import ServerConfig, serve

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"


def config(tmp_path: Path, **kw: object) -> ServerConfig:
    return ServerConfig(fabric=load_fabric(FABRIC), state_dir=tmp_path / "state", **kw)  # type: ignore[arg-type]


def test_a_port_in_use_is_unavailable(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(UnavailableError, match=f"port {port} on 127.0.0.1 is already in use"):
            serve(config(tmp_path, port=port))
    assert not (tmp_path / "state").exists()  # nothing was created


@pytest.mark.parametrize(
    ("kw", "words"),
    [
        ({"log_level": "loud"}, "unknown log level 'loud'"),
        ({"db_url": "oracle://x"}, "supports SQLite and PostgreSQL"),
    ],
)
def test_bad_settings_are_refused_before_serving(
    tmp_path: Path, kw: dict[str, object], words: str
) -> None:
    with pytest.raises(ValidationError, match=words):
        serve(config(tmp_path, port=0, **kw))


def test_a_sqlite_file_in_a_folder_that_does_not_exist_is_refused_creating_nothing(
    tmp_path: Path,
) -> None:
    missing = tmp_path / "nonexistent" / "dir"
    with pytest.raises(ValidationError) as raised:
        serve(config(tmp_path, port=0, db_url=f"sqlite:///{missing / 'x.db'}"))
    assert raised.value.message == (
        f"the SQLite database {missing / 'x.db'} cannot be created: {missing} does not exist"
    )
    assert list(tmp_path.iterdir()) == []  # neither that folder nor the state folder


def _server(state: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            *(sys.executable, "-m", "onecluster.cli", "--state-dir", str(state), "server"),
            *("--fabric", str(FABRIC), "--port", "0", *extra),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for(condition: Callable[[], bool], what: str, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not condition():
        if proc.poll() is not None:
            raise AssertionError(f"the server exited before {what}: {proc.communicate()[0]}")
        assert time.monotonic() < deadline, f"timed out waiting until {what}"
        time.sleep(0.05)


@pytest.mark.integration
def test_server_writes_the_url_it_listens_on_and_a_second_one_leaves_it_alone(
    tmp_path: Path,
) -> None:
    state = tmp_path / "state"
    url_file = state / "server.url"
    first = _server(state)
    try:
        _wait_for(url_file.exists, "server.url appears", first)
        url = url_file.read_text().strip()
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0")  # the real port
        health = httpx.get(f"{url}/healthz", timeout=5).json()
        assert health["status"] == "ok" and health["leader"] == url
        # the CLI in that folder finds it with no --server
        sites = CliRunner().invoke(build_app(), ["--state-dir", str(state), "sites", "--json"])
        assert sites.exit_code == 0, sites.stderr

        second = _server(state)
        out, _ = second.communicate(timeout=60)
        assert second.returncode == 4, out
        assert f"another onecluster server is using the state folder {state}" in out
        assert f"(it listens on {url})" in out
        assert url_file.read_text().strip() == url  # not clobbered
        assert httpx.get(f"{url}/healthz", timeout=5).status_code == 200
    finally:
        first.send_signal(signal.SIGTERM)
        first.communicate(timeout=30)
    assert not url_file.exists()  # a clean stop removes it
    again = _server(state)  # and the folder is free again
    try:
        _wait_for(url_file.exists, "the restarted server writes server.url", again)
    finally:
        again.send_signal(signal.SIGTERM)
        again.communicate(timeout=30)


@pytest.mark.parametrize(("name", "share"), [("bulk_share", 0.0), ("relay_share", 1.5)])
def test_a_share_of_a_circuit_outside_0_to_1_is_refused(
    tmp_path: Path, name: str, share: float
) -> None:
    with pytest.raises(ValidationError, match=f"{name} must be a fraction in"):
        config(tmp_path, **{name: share})


def test_a_heartbeat_longer_than_a_third_of_the_silence_that_closes_a_site_is_refused(
    tmp_path: Path,
) -> None:
    """The server tells its agents how often to sync: every 31 s would close each site to
    new work for a moment of each cycle (a site silent 30 s takes none)."""
    with pytest.raises(ValidationError, match="heartbeat_interval_s must be at most 10 s"):
        config(tmp_path, heartbeat_interval_s=31.0)


def test_the_shares_are_the_etiquette_of_transfers(tmp_path: Path) -> None:
    etiquette = config(tmp_path, bulk_share=0.8, relay_share=0.25).etiquette
    assert (etiquette.bulk_share, etiquette.relay_share) == (0.8, 0.25)
    default = config(tmp_path).etiquette
    assert (default.bulk_share, default.relay_share) == (1.0, 0.5)
