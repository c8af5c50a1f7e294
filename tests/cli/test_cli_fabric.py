"""``onecluster fabric apply|show`` and ``onecluster drain`` against a real server on
loopback (in this process, so that a test can play a site's agent and run reconcile passes)."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import pytest
import uvicorn
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.client import Client
from onecluster.fabric import dump_fabric, load_fabric, parse_fabric
from onecluster.model import Circuit, Fabric, GpuPool, Site
from onecluster.schema import AgentSync, AttemptReport, JobSubmit, TokenCreate
from onecluster.server import Reconciler, ServerConfig, _routes_fabric, create_app

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
THREE = load_fabric(ROOT / "examples" / "fabrics" / "three-site.yaml")


@dataclass
class Served:
    url: str
    admin: str
    reconciler: Reconciler


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    config = ServerConfig(fabric=THREE, state_dir=tmp_path / "state", reconcile_interval_s=3600.0)
    app = create_app(config)
    if "/api/v1/fabric" not in {getattr(r, "path", None) for r in app.routes}:
        app.include_router(_routes_fabric.router)  # until create_app includes them itself
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        admin = (tmp_path / "state" / "admin.token").read_text().strip()
        yield Served(f"http://127.0.0.1:{sock.getsockname()[1]}", admin, app.state.reconciler)
    finally:
        server.should_exit = True
        thread.join(timeout=20)


def _cli(served: Served, *args: str, input: str | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        build_app(),
        ["--server", served.url, "--token", served.admin, *args],
        env={"COLUMNS": "200"},
        input=input,
    )
    return result.exit_code, result.stdout, result.stderr


def _file(tmp_path: Path, fabric: Fabric, name: str = "fabric.yaml") -> str:
    path = tmp_path / name
    path.write_text(dump_fabric(fabric))
    return str(path)


def _onboarded() -> Fabric:
    osaka = Site(
        name="osaka", region="ap-northeast-3", jurisdiction="JP",
        pools=(GpuPool(gpu_type="H200", count=16, cost_per_gpu_hour=4.0),),
    )  # fmt: skip
    link = Circuit(name="tyo-osa", a="tokyo", b="osaka", capacity_gbps=10, rtt_ms=8)
    return replace(THREE, sites=(*THREE.sites, osaka), circuits=(*THREE.circuits, link))


def _without_l40s() -> Fabric:
    return replace(
        THREE,
        sites=tuple(
            replace(s, pools=tuple(p for p in s.pools if p.gpu_type != "L40S")) for s in THREE.sites
        ),
        teams=tuple(
            replace(t, quota={k: v for k, v in (t.quota or {}).items() if k != "L40S"})
            for t in THREE.teams
        ),
    )


def _run_on_tokyo_l40s(served: Served) -> None:
    """A 16-GPU job running on Tokyo's L40S pool (this test plays Tokyo's agent)."""
    with Client(served.url, served.admin) as admin:
        agent = Client(
            served.url, admin.create_token(TokenCreate(role="agent", site="tokyo")).token
        )
        agent.agent_sync("tokyo", AgentSync(agent_id="a1"))
        admin.submit(
            JobSubmit(
                team="speech", gpus=16, duration_s=600.0, gpu_types=["L40S"], command=["true"]
            )
        )
        served.reconciler.step()
        [run] = agent.agent_sync("tokyo", AgentSync(agent_id="a1")).attempts
        report = AttemptReport(attempt_id=run.attempt_id, job_id=run.job_id, state="running")
        agent.agent_sync("tokyo", AgentSync(agent_id="a1", attempts=[report]))
        agent.close()


def test_show_prints_the_fabric_in_force_its_file_and_json(served: Served) -> None:
    code, out, err = _cli(served, "fabric", "show")
    assert code == 0, err
    assert "fabric three-site version 1, applied " in out
    assert "by onecluster server --fabric" in out and "nothing is drained" in out
    code, out, _ = _cli(served, "fabric", "show", "--yaml")
    assert code == 0 and parse_fabric(out) == THREE
    code, out, _ = _cli(served, "fabric", "show", "--json")
    assert code == 0 and json.loads(out)["version"] == 1


def test_apply_shows_the_diff_asks_and_applies(served: Served, tmp_path: Path) -> None:
    path = _file(tmp_path, _onboarded())
    code, out, err = _cli(served, "fabric", "apply", path, "--dry-run")
    assert code == 0, err
    assert "changes to fabric version 1:" in out
    rows = [[c.strip() for c in line.split("│")[1:-1]] for line in out.splitlines()]
    assert ["+", "site", "osaka"] in [r[:3] for r in rows]
    assert ["+", "pool", "osaka/H200", "count 16, cost_per_gpu_hour 4"] in rows
    assert ["+", "circuit", "tyo-osa"] in [r[:3] for r in rows]
    code, _, err = _cli(served, "fabric", "apply", path, input="n\n")
    assert code == 1 and "nothing applied" in err
    assert json.loads(_cli(served, "fabric", "show", "--json")[1])["version"] == 1
    code, out, err = _cli(served, "fabric", "apply", path, input="y\n")
    assert code == 0, err
    assert "apply this as fabric version 2?" in err
    assert "fabric version 2 is in force (3 change(s))" in out
    code, out, err = _cli(served, "fabric", "apply", path, "--yes")
    assert code == 0 and "no change: fabric version 2 is in force already" in err
    code, out, _ = _cli(served, "sites", "--json")
    assert [s["name"] for s in json.loads(out)][-1] == "osaka"
    code, out, _ = _cli(served, "events", "--kind", "fabric_")
    assert "fabric_site_added" in out and "fabric_circuit_added" in out


def test_apply_with_json_and_yes_prints_the_answer_only(served: Served, tmp_path: Path) -> None:
    code, out, err = _cli(
        served, "fabric", "apply", _file(tmp_path, _onboarded()), "--yes", "--json"
    )
    assert code == 0, err
    answer = json.loads(out)
    assert (answer["applied"], answer["version"], answer["base_version"]) == (True, 2, 1)
    assert answer["changes"][0]["event"] == "fabric_site_added"


def test_a_change_that_strands_work_is_refused_with_exit_4(served: Served, tmp_path: Path) -> None:
    _run_on_tokyo_l40s(served)
    path = _file(tmp_path, _without_l40s())
    code, _, err = _cli(served, "fabric", "apply", path, "--dry-run")
    assert code == 4
    assert "would strand: pool tokyo/L40S is removed but 1 attempt(s) hold 16" in " ".join(
        err.split()
    )
    assert "onecluster drain" in err
    code, _, err = _cli(served, "fabric", "apply", path, "--yes")
    assert code == 4
    assert json.loads(_cli(served, "fabric", "show", "--json")[1])["version"] == 1


def test_a_file_that_is_no_fabric_is_refused_with_its_line(served: Served, tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("fabric: x\nsites:\n  - name: a\n    regoin: r\n")
    code, _, err = _cli(served, "fabric", "apply", str(path))
    assert code == 2
    assert f"{path}:4" in err and "unknown field 'regoin'" in err


def test_drain_a_pool_then_undo_it(served: Served) -> None:
    _run_on_tokyo_l40s(served)
    code, out, err = _cli(served, "drain", "tokyo", "--pool", "L40S", "--reason", "rack swap")
    assert code == 0, err
    assert "pool tokyo/L40S is draining: it takes no new work; 16 GPU(s) still in use" in out
    code, out, _ = _cli(served, "sites")
    assert "L40S 16/112 at 1.10/h draining" in out
    code, out, _ = _cli(served, "fabric", "show")
    assert "drained (no new work):" in out and "rack swap" in out
    code, out, _ = _cli(served, "drain", "tokyo")
    assert code == 0 and "site tokyo is draining" in out
    code, out, _ = _cli(served, "drain", "tokyo", "--pool", "L40S", "--undo")
    assert code == 0 and "pool tokyo/L40S takes new work again" in out
    assert "site tokyo itself is still drained" in out
    code, out, _ = _cli(served, "drain", "tokyo", "--undo")
    assert code == 0 and "site tokyo takes new work again" in out
    code, out, _ = _cli(served, "drain", "tokyo", "--undo")
    assert code == 0 and "site tokyo was not drained; nothing changed" in out
    code, _, err = _cli(served, "drain", "atlantis")
    assert code == 3 and "no site 'atlantis'" in err
