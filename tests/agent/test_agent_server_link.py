"""ServerLink over several server replicas: a sync moves on from a dead, silent or failing
replica within its budget, sticks to the one that answered, and stops at a refusal; and the
agent's configuration takes a list of server URLs.

The replicas are the fake control plane of ``conftest.py`` (two of them) and a real socket that
accepts connections and never answers.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from onecluster.agent import AgentConfig, ServerLink
from onecluster.errors import AuthError, UnavailableError, ValidationError
from onecluster.schema import AgentSync

TOKEN = "agent-token-sha"
BODY = AgentSync(agent_id="x", capacity={"H100": 8})


@pytest.fixture
def replica_b(control_plane: Any) -> Iterator[Any]:
    """A second fake control plane beside ``control_plane``."""
    fake = type(control_plane)()
    fake.start()
    yield fake
    fake.stop()


def _closed_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"  # closed when the block ended: nothing listens there


@pytest.fixture
def silent() -> Iterator[str]:
    """A server that accepts connections and never answers (stopped, overloaded)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    listener.close()


@pytest.mark.parametrize("failure", ["dead", "503", "drop"])
def test_a_sync_moves_on_to_the_next_replica_and_sticks_to_it(
    control_plane: Any, replica_b: Any, failure: str
) -> None:
    # "drop": A read the sync and closed the connection; a sync is idempotent, so it is resent.
    first = _closed_url() if failure == "dead" else control_plane.url
    control_plane.mode = failure
    link = ServerLink(f"{first},{replica_b.url}", TOKEN, timeout_s=2.0)
    try:
        reply = link.agent_sync("sha", BODY, timeout_s=3.0)
        assert reply.heartbeat_interval_s == 0.05
        assert len(replica_b.syncs) == 1
        assert link.servers.current == replica_b.url
        control_plane.mode = "ok"  # A is fine again: the agent stays with B all the same
        link.agent_sync("sha", BODY, timeout_s=3.0)
    finally:
        link.close()
    assert (len(control_plane.syncs), len(replica_b.syncs)) == (0, 2)


def test_a_silent_replica_gets_a_share_of_the_budget_and_the_next_one_answers_in_time(
    silent: str, replica_b: Any
) -> None:
    link = ServerLink([silent, replica_b.url], TOKEN, timeout_s=5.0)
    began = time.monotonic()
    try:
        link.agent_sync("sha", BODY, timeout_s=1.5)
    finally:
        link.close()
    assert time.monotonic() - began < 1.5
    assert len(replica_b.syncs) == 1


def test_the_whole_sync_is_over_by_its_budget_when_no_replica_answers(silent: str) -> None:
    # The lease may not wait: two silent replicas and a dead one share the 1.2 s.
    dead = _closed_url()
    other = silent.replace("127.0.0.1", "localhost")
    link = ServerLink([silent, dead, other], TOKEN, timeout_s=5.0)
    began = time.monotonic()
    try:
        with pytest.raises(UnavailableError) as raised:
            link.agent_sync("sha", BODY, timeout_s=1.2)
    finally:
        link.close()
    assert time.monotonic() - began < 1.2 + 0.3
    message = raised.value.message
    assert message.startswith("no onecluster server answered the sync: ")
    for url in (silent, dead, other):
        assert f"{url}: cannot reach the onecluster server at {url}" in message


def test_a_refusal_is_the_answer_and_is_not_sent_to_another_replica(
    control_plane: Any, replica_b: Any
) -> None:
    link = ServerLink([control_plane.url, replica_b.url], "a-token-of-another-site", timeout_s=2.0)
    try:
        with pytest.raises(AuthError, match="bad token"):
            link.agent_sync("sha", BODY, timeout_s=3.0)
    finally:
        link.close()
    assert replica_b.syncs == []
    assert link.servers.current == control_plane.url


def test_one_replica_fails_as_it_always_did(control_plane: Any) -> None:
    control_plane.mode = "503"
    link = ServerLink(control_plane.url, TOKEN)
    try:
        with pytest.raises(UnavailableError, match=r"^db down$"):
            link.agent_sync("sha", BODY, timeout_s=3.0)
    finally:
        link.close()


# -- the agent's configuration -----------------------------------------------------------------


def _config(server_url: str, **extra: Any) -> AgentConfig:
    return AgentConfig(site="sha", server_url=server_url, token=TOKEN, pools={"H100": 1}, **extra)


def test_the_agent_takes_several_server_urls_and_keeps_them_normalised() -> None:
    config = _config(" http://10.0.0.1:8080/ , http://10.0.0.2:8080")
    assert config.server_url == "http://10.0.0.1:8080,http://10.0.0.2:8080"
    assert config.server_urls == ("http://10.0.0.1:8080", "http://10.0.0.2:8080")
    assert _config("http://127.0.0.1:8080").server_urls == ("http://127.0.0.1:8080",)


def test_the_data_address_is_found_toward_the_first_replica_whose_name_resolves(
    tmp_path: Path,
) -> None:
    config = _config("http://no-such-host.invalid:8080,http://127.0.0.1:8080", work_dir=tmp_path)
    assert config.resolved_data_address() == "127.0.0.1"


@pytest.mark.parametrize(
    ("server_url", "words"),
    [
        ("http://127.0.0.1:1,,http://127.0.0.1:2", "has an empty entry (number 2)"),
        ("http://127.0.0.1:1,127.0.0.1:2", "must start with http:// or https://"),
        ("http://127.0.0.1:1, http://127.0.0.1:1/", "names the same server twice"),
        ("", "the agent's server URL is empty"),
    ],
)
def test_the_agent_refuses_a_server_list_that_cannot_work(server_url: str, words: str) -> None:
    with pytest.raises(ValidationError) as raised:
        _config(server_url)
    assert words in raised.value.message
