"""Every metric the shipped rules and dashboard name is exported by a running component.

Real processes, each in its own session: ``onecluster server`` (its ``/metrics``),
``onecluster agent --metrics`` probing a circuit (the probe and data plane exporters),
``onecluster gateway serve`` (its ``/metrics``) and a training worker started by
``python -m onecluster.training launch --prometheus`` (its ``/metrics``, served while it
waits for the other site).  A name the rules use that no component exports would be
an alert that can never fire.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from shipped import exported_names, used_names

from onecluster.client import Client
from onecluster.process import stop_pids
from onecluster.schema import TokenCreate

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
FABRIC = str(ROOT / "examples" / "fabrics" / "three-site.yaml")
GATEWAY = str(ROOT / "examples" / "gateway.yaml")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def scraped(url: str, holding: str = "") -> Callable[[], str | None]:
    """A look at ``url``: its body once it answers 200 with ``holding`` in it, else ``None``."""

    def look() -> str | None:
        try:
            r = httpx.get(url, timeout=2)
        except httpx.TransportError:
            return None
        return r.text if r.status_code == 200 and holding in r.text else None

    return look


class Processes:
    """Child processes of ``onecluster``, stopped (SIGTERM, then SIGKILL) at the end."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def spawn(
        self, name: str, argv: list[str], *, module: str = "onecluster.cli", **env: str
    ) -> None:
        with (self.tmp / f"{name}.log").open("ab") as log:
            self.procs[name] = subprocess.Popen(
                [sys.executable, "-m", module, *argv],
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **env},
                start_new_session=True,
            )

    def wait_for(self, name: str, look: Callable[[], str | None], timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while (found := look()) is None:
            log = (self.tmp / f"{name}.log").read_text(errors="replace")[-3000:]
            assert self.procs[name].poll() is None, f"{name} ended:\n{log}"
            assert time.monotonic() < deadline, f"{name} did not answer in {timeout} s:\n{log}"
            time.sleep(0.1)
        return found

    def stop(self) -> None:
        """SIGTERM each process's group, SIGKILL what is left after 20 s, and reap them."""
        stop_pids([p.pid for p in self.procs.values()], grace_s=20, groups=True)
        for proc in self.procs.values():
            proc.wait()


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    p = Processes(tmp_path)
    yield p
    p.stop()


def test_every_metric_the_rules_and_dashboard_use_is_exported(
    processes: Processes, tmp_path: Path
) -> None:
    state = tmp_path / "state"
    port = free_port()
    server = f"http://127.0.0.1:{port}"
    processes.spawn(
        "server", ["--state-dir", str(state), "server", "--fabric", FABRIC, "--port", str(port)]
    )
    ready = tmp_path / "gateway.port"
    processes.spawn(
        "gateway",
        [
            "--state-dir", str(tmp_path / "gw"), "gateway", "serve", "--config", GATEWAY,
            "--port", "0", "--ready-file", str(ready),
        ],
    )  # fmt: skip
    # The circuits are exported once the server leads and has taken office (its first pass).
    leading = scraped(f"{server}/metrics", holding="onecluster_circuit_state{")
    exported = exported_names(processes.wait_for("server", leading))

    with Client(server, (state / "admin.token").read_text().strip()) as admin:
        token = admin.create_token(TokenCreate(role="agent", site="shanghai")).token
    metrics = f"127.0.0.1:{free_port()}"
    processes.spawn(
        "agent",
        [
            "--server", server, "agent", "--site", "shanghai", "--backend", "local",
            "--fabric", FABRIC, "--work-dir", str(tmp_path / "agent"),
            "--link", "sha-tyo=127.0.0.1", "--probe-port", "0", "--metrics", metrics,
        ],
        ONECLUSTER_TOKEN=token,
    )  # fmt: skip
    exported |= exported_names(processes.wait_for("agent", scraped(f"http://{metrics}/metrics")))
    gateway = f"http://127.0.0.1:{processes.wait_for('gateway', lambda: _read(ready))}"
    exported |= exported_names(processes.wait_for("gateway", scraped(f"{gateway}/metrics")))
    training = f"127.0.0.1:{free_port()}"
    processes.spawn(
        "training",
        [
            "launch", "--prometheus", training, "--",
            sys.executable, "-m", "onecluster.training.chargpt", "--rendezvous-timeout", "120",
        ],
        module="onecluster.training",
        ONECLUSTER_GANG_SITES="east,west",
        ONECLUSTER_GANG_RANK="0",
        ONECLUSTER_GANG_PORT=str(free_port()),
    )  # fmt: skip
    exported |= exported_names(
        processes.wait_for("training", scraped(f"http://{training}/metrics"))
    )

    assert used_names() - exported == set()
    assert {
        "onecluster_link_rtt_min_seconds",
        "onecluster_gateway_calls_total",
        "onecluster_dataplane_chunk_verify_failures_total",
        "onecluster_training_outer_sync_duration_seconds_bucket",
    } <= exported


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except FileNotFoundError:
        return None
