"""AgentConfig validation and run_agent: start-up failures, and a real SIGTERM shutdown."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

from onecluster.agent import AgentConfig, run_agent
from onecluster.errors import NotFoundError, ValidationError

TOKEN = "agent-token-sha"
FABRIC = Path(__file__).parents[2] / "examples" / "fabrics" / "four-site-metro.yaml"


def config(**fields: Any) -> AgentConfig:
    base: dict[str, Any] = {"site": "sha", "server_url": "http://127.0.0.1:1", "token": TOKEN}
    return AgentConfig(**{**base, **fields})


def test_pools_come_from_the_fabric_file() -> None:
    cfg = config(site="metro-north", fabric_path=FABRIC)
    assert cfg.resolved_pools() == {"H100": 256, "L40S": 64}
    with pytest.raises(NotFoundError, match="not in the fabric file"):
        config(site="nowhere", fabric_path=FABRIC).resolved_pools()


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({}, "either directly or through a fabric file"),
        ({"pools": {"H100": 1}, "fabric_path": FABRIC}, "either directly"),
        ({"pools": {"H100": 1}, "backend": "nomad"}, "not available in this agent"),
        ({"pools": {"H100": 1}, "server_url": "localhost:8000"}, "must start with http"),
        ({"pools": {"H100": 1}, "heartbeat_interval_s": 0}, "heartbeat interval"),
        ({"pools": {"H100": 1}, "heartbeat_interval_s": 31}, "at most 10 s"),
    ],
)
def test_bad_configs_are_refused(fields: dict[str, Any], match: str) -> None:
    with pytest.raises(ValidationError, match=match):
        config(**fields)


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"backend": "slurm"}, "needs --slurm-conf"),
        ({"slurm_conf": Path("/etc/slurm.conf")}, "needs --slurm-conf"),
        ({"fabric_path": FABRIC, "site": "metro-north", "backend": "slurm"}, "runs local"),
        ({"backend": "local", "kubeconfig": Path("/k")}, "with the kubernetes backend"),
        ({"backend": "slurm", "kueue_queue": "q", "slurm_conf": Path("/s")}, "kubernetes"),
    ],
)
def test_backend_options_that_do_not_fit_are_refused(fields: dict[str, Any], match: str) -> None:
    base: dict[str, Any] = {} if "fabric_path" in fields else {"pools": {"H100": 1}}
    with pytest.raises(ValidationError, match=match):
        config(**base, **fields).resolved_backend()


def test_the_backend_is_the_fabric_sites_unless_named(tmp_path: Path) -> None:
    assert config(pools={"H100": 1}).resolved_backend() == "local"
    assert config(site="metro-north", fabric_path=FABRIC).resolved_backend() == "local"
    mixed = Path(__file__).parents[2] / "examples" / "fabrics" / "three-site-slurm.yaml"
    conf = tmp_path / "slurm.conf"
    cfg = config(site="tokyo", fabric_path=mixed, slurm_conf=conf)
    assert cfg.resolved_backend() == "slurm"
    assert config(pools={"H100": 1}, backend="kubernetes").resolved_backend() == "kubernetes"


def test_work_dir_defaults_under_the_home_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", "/home/ops")
    assert config(pools={"H100": 1}).resolved_work_dir() == Path("/home/ops/.onecluster/agent/sha")


def test_run_agent_raises_the_error_that_keeps_it_from_starting() -> None:
    with pytest.raises(NotFoundError, match="site 'nowhere' is not in the fabric file"):
        run_agent(config(site="nowhere", fabric_path=FABRIC))


def test_run_agent_runs_until_stopped(control_plane: Any, tmp_path: Path) -> None:
    stop = threading.Event()
    cfg = config(
        server_url=control_plane.url,
        pools={"H100": 4},
        work_dir=tmp_path,
        heartbeat_interval_s=0.05,
    )
    result: list[None] = []
    thread = threading.Thread(target=lambda: result.append(run_agent(cfg, stop=stop)))
    thread.start()
    control_plane.wait_for(lambda b: b["capacity"] == {"H100": 4})
    stop.set()
    thread.join(timeout=10)
    assert result == [None]


def test_sigterm_stops_the_agent_process_cleanly(
    control_plane: Any, make_run_order: Any, tmp_path: Path
) -> None:
    control_plane.want(make_run_order("a1", "echo ready; while :; do sleep 0.02; done"))
    program = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from onecluster.agent import AgentConfig, run_agent
        cfg = AgentConfig(site="sha", server_url={control_plane.url!r}, token={TOKEN!r},
                          pools={{"H100": 4}}, work_dir=Path({str(tmp_path)!r}),
                          heartbeat_interval_s=0.05, stop_grace_s=0.5)
        run_agent(cfg)
        """
    )
    agent = subprocess.Popen([sys.executable, "-c", program])
    try:
        control_plane.wait_for(lambda b: "ready" in control_plane.logs_of("a1"), timeout=15)
        agent.send_signal(signal.SIGTERM)
        assert agent.wait(timeout=10) == 0
    finally:
        if agent.poll() is None:
            agent.kill()
            agent.wait()
    last = control_plane.syncs[-1]["attempts"]
    assert [(a["attempt_id"], a["state"], a["exit_code"]) for a in last] == [("a1", "lost", 143)]
