"""The replicas of `up`: where they listen and keep their state, the files the CLI finds them
by, and the watch that tells of a replica lost and of a new leader while the others serve on."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

import pytest

from onecluster.errors import BackendError, ConflictError
from onecluster.launch import Launcher, free_port
from onecluster.schema import LeaderOut
from onecluster.up._replicas import (
    Replica,
    ReplicaView,
    ReplicaWatch,
    plan_replicas,
    publish_replicas,
    replica_admin_token,
)


def _leader(url: str | None, term: int) -> LeaderOut:
    return LeaderOut(
        leader=url,
        leader_id=None,
        term=term,
        since=None,
        expires_in_s=None,
        answered_by="http://127.0.0.1:1",
        answered_by_id="x",
        role="follower",
        servers=[],
    )


def _two(tmp_path: Path) -> tuple[Replica, ...]:
    return plan_replicas(tmp_path, host="127.0.0.1", port=free_port("127.0.0.1"), count=2)


def test_one_replica_is_the_server_on_the_state_folder_as_always(tmp_path: Path) -> None:
    (only,) = plan_replicas(tmp_path, host="127.0.0.1", port=9123, count=1)
    assert only == Replica(
        name="server", port=9123, url="http://127.0.0.1:9123", state_dir=tmp_path
    )


def test_several_replicas_have_their_own_names_ports_and_state_folders(tmp_path: Path) -> None:
    replicas = plan_replicas(tmp_path, host="127.0.0.1", port=None, count=3)
    assert [r.name for r in replicas] == ["server-1", "server-2", "server-3"]
    assert [r.state_dir for r in replicas] == [tmp_path / "replicas" / str(i) for i in (1, 2, 3)]
    assert len({r.port for r in replicas}) == 3
    assert [r.url for r in replicas] == [f"http://127.0.0.1:{r.port}" for r in replicas]


def test_the_cli_finds_every_replica_and_the_token_in_up_s_state_folder(tmp_path: Path) -> None:
    replicas = _two(tmp_path)
    minted = replicas[0].state_dir / "admin.token"
    minted.parent.mkdir(parents=True)
    minted.write_text("oc_admin_fresh\n")
    (tmp_path / "admin.token").write_text("oc_admin_of_an_older_database\n")
    assert replica_admin_token(tmp_path, replicas) == "oc_admin_fresh"
    assert (tmp_path / "admin.token").stat().st_mode & 0o777 == 0o600
    published = publish_replicas(tmp_path, replicas)
    assert published == tmp_path / "server.url"
    assert published.read_text() == f"{replicas[0].url},{replicas[1].url}\n"


def test_a_database_that_existed_keeps_the_token_of_the_up_that_made_it(tmp_path: Path) -> None:
    (tmp_path / "admin.token").write_text("oc_admin_kept\n")
    assert replica_admin_token(tmp_path, _two(tmp_path)) == "oc_admin_kept"


def test_a_database_whose_token_nobody_here_holds_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConflictError, match="already has an admin token") as caught:
        replica_admin_token(tmp_path, _two(tmp_path))
    assert "empty database" in (caught.value.hint or "")


def test_one_replica_publishes_nothing_it_writes_its_own_url(tmp_path: Path) -> None:
    replicas = plan_replicas(tmp_path, host="127.0.0.1", port=9123, count=1)
    assert publish_replicas(tmp_path, replicas) is None
    assert not (tmp_path / "server.url").exists()


def test_the_view_tells_of_the_leader_a_lost_replica_and_the_next_leader(tmp_path: Path) -> None:
    a, b = _two(tmp_path)
    view = ReplicaView(replicas=(a, b))
    view, lines = view.observe(exited={}, leader=_leader(a.url, 1))
    assert lines == [f"server-1 leads at {a.url} (term 1)"]
    assert view.observe(exited={}, leader=_leader(a.url, 1))[1] == []  # no change, no line
    view, lines = view.observe(exited={"server-1": (41, 137)}, leader=_leader(None, 1))
    assert lines == ["lost replica server-1 (pid 41, exit status 137); 1 of 2 replicas serve on"]
    assert view.lost == {"server-1"} and view.leader == a.url  # a vacant lease is no change
    view, lines = view.observe(exited={}, leader=None)  # nobody answered: no change either
    assert lines == []
    view, lines = view.observe(exited={"server-1": (41, 137)}, leader=_leader(b.url, 2))
    assert lines == [f"server-2 leads at {b.url} (term 2, after server-1)"]


def test_the_view_raises_once_every_replica_is_lost(tmp_path: Path) -> None:
    a, b = _two(tmp_path)
    view = ReplicaView(replicas=(a, b), lost=frozenset({"server-1"}))
    with pytest.raises(
        BackendError, match=r"every server replica has exited \(server-1, server-2\)"
    ):
        view.observe(exited={"server-2": (42, 1)}, leader=None)


def _wait_exited(launcher: Launcher, name: str) -> None:
    deadline = time.monotonic() + 10
    while name not in {launched.name for launched, _ in launcher.exited()}:
        assert time.monotonic() < deadline, f"{name} did not exit"
        time.sleep(0.02)


def test_the_watch_rides_out_a_lost_replica_but_not_a_lost_agent(tmp_path: Path) -> None:
    replicas = _two(tmp_path)
    said: list[str] = []
    leaders = iter([_leader(replicas[0].url, 1), _leader(replicas[1].url, 2)])
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    with Launcher(tmp_path / "logs", grace_s=1.0) as launcher:
        first = launcher.start("server-1", sleeper)
        launcher.start("server-2", sleeper)
        agent = launcher.start("agent-tokyo", sleeper)
        watch = ReplicaWatch(launcher, replicas, leader=lambda: next(leaders), say=said.append)
        watch()
        os.kill(first.pid, signal.SIGKILL)
        _wait_exited(launcher, "server-1")
        watch()
        assert said == [
            f"server-1 leads at {replicas[0].url} (term 1)",
            f"lost replica server-1 (pid {first.pid}, exit status 137); 1 of 2 replicas serve on",
            f"server-2 leads at {replicas[1].url} (term 2, after server-1)",
        ]
        assert [c.name for c in launcher.children] == ["server-2", "agent-tokyo"]
        os.kill(agent.pid, signal.SIGKILL)
        _wait_exited(launcher, "agent-tokyo")
        with pytest.raises(BackendError, match=r"agent-tokyo \(pid \d+\) exited with status 137"):
            watch()


def test_the_watch_of_one_replica_asks_the_server_nothing(tmp_path: Path) -> None:
    replicas = plan_replicas(tmp_path, host="127.0.0.1", port=9123, count=1)

    def leader() -> LeaderOut:
        raise AssertionError("one replica: nobody to ask who leads")

    with Launcher(tmp_path / "logs", grace_s=1.0) as launcher:
        server = launcher.start("server", [sys.executable, "-c", "import time; time.sleep(60)"])
        watch = ReplicaWatch(launcher, replicas, leader=leader, say=print)
        watch()
        os.kill(server.pid, signal.SIGKILL)
        _wait_exited(launcher, "server")
        with pytest.raises(BackendError, match=r"server \(pid \d+\) exited"):
            watch()
