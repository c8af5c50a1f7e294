"""Starting the stack's server: the flags a caller adds reach the server's own command line
(the lab passes ``--relay-share`` this way), and a flag the server refuses is reported with
the server's log rather than waited on; an agent is given every server replica."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import httpx
import pytest

from onecluster.client import Client
from onecluster.errors import BackendError
from onecluster.launch import Launcher, free_port, start_agent, start_server, wait_server
from onecluster.process import cmdline

FABRIC = Path(__file__).resolve().parents[2] / "examples" / "fabrics" / "three-site.yaml"


def test_extra_flags_reach_the_server_and_it_starts_with_them(tmp_path: Path) -> None:
    with Launcher(tmp_path / "logs", grace_s=5) as launcher:
        server = start_server(
            launcher,
            python=sys.executable,
            state_dir=tmp_path / "state",
            fabric=FABRIC,
            host="127.0.0.1",
            port=free_port("127.0.0.1"),
            extra=["--relay-share", "1", "--bulk-share", "0.8"],
        )
        wait_server(launcher, server, timeout_s=60)
        argv = [a.decode() for a in cmdline(server.process.pid)]
        assert argv[-4:] == ["--relay-share", "1", "--bulk-share", "0.8"]


def test_a_flag_the_server_refuses_is_an_error_naming_its_log(tmp_path: Path) -> None:
    with Launcher(tmp_path / "logs", grace_s=5) as launcher:
        server = start_server(
            launcher,
            python=sys.executable,
            state_dir=tmp_path / "state",
            fabric=FABRIC,
            host="127.0.0.1",
            port=free_port("127.0.0.1"),
            extra=["--relay-share", "2"],  # a share is at most 1
        )
        with pytest.raises(BackendError, match="server") as caught:
            wait_server(launcher, server, timeout_s=60)
        assert "relay-share" in (caught.value.hint or "")


def test_an_agent_s_de_identification_key_is_made_once_private_and_kept(tmp_path: Path) -> None:
    from onecluster.cli._agent import _deid_key
    from onecluster.launch._stack import deid_key_file

    key = deid_key_file(tmp_path / "agent")
    assert key.stat().st_mode & 0o777 == 0o600
    first = key.read_bytes()
    assert deid_key_file(tmp_path / "agent").read_bytes() == first  # kept across restarts
    assert _deid_key(key, None) == first.strip()
    assert _deid_key(None, None) is None  # no key: this site cannot be an export's source


def test_an_agent_is_given_every_server_replica_in_order(tmp_path: Path) -> None:
    def tokens(request: httpx.Request) -> httpx.Response:
        assert request.url.path == "/api/v1/tokens"
        body = {"token": "oc_agent_x", "id": "t-1", "role": "agent", "team": None, "site": "tokyo"}
        return httpx.Response(201, json=body)

    replicas = ["http://127.0.0.1:8080", "http://127.0.0.1:8081"]
    waiting = [sys.executable, "-c", "import time; time.sleep(30)"]
    with (
        Client(replicas, "oc_admin", transport=httpx.MockTransport(tokens)) as admin,
        Launcher(tmp_path / "logs", grace_s=5) as launcher,
    ):
        agent = start_agent(
            launcher,
            admin,
            python=sys.executable,
            site="tokyo",
            fabric=FABRIC,
            work_dir=tmp_path / "work",
            env={},
            wrap=lambda argv: [*waiting, *argv],  # keeps its command line to read
        )
        argv = _argv_once_started(agent.pid)
    assert argv[argv.index("--server") + 1] == ",".join(replicas)


def _argv_once_started(pid: int) -> list[str]:
    """``pid``'s command line once it has replaced the forked copy of this one."""
    deadline = time.monotonic() + 10
    while "--server" not in (argv := [a.decode() for a in cmdline(pid)]):
        assert time.monotonic() < deadline, argv
        time.sleep(0.01)
    return argv
