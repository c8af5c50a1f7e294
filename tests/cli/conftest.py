"""A real `onecluster server` process on loopback for the CLI's tests, one per module."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

ROOT = Path(__file__).resolve().parents[2]
FABRIC = str(ROOT / "examples" / "fabrics" / "three-site.yaml")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    state = tmp_path_factory.mktemp("state")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (state / "server.log").open("wb")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "onecluster.cli",
            "--state-dir",
            str(state),
            "server",
            "--fabric",
            FABRIC,
            "--port",
            str(port),
            "--grace",
            "20",
            "--fair-share-half-life",
            "86400",
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, (state / "server.log").read_text()
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.2)
        yield url, (state / "admin.token").read_text().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()
