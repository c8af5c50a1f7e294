"""The lab tier: tests that need root, network namespaces and /dev/net/tun (CI runs as root).

Elsewhere they are skipped with the reason.  Every namespace a test makes is named
``octest…`` and removed in teardown; lab tests use a lab called ``octest`` kept under the
test's temporary directory, so they never touch a developer's own ``oclab``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from onecluster.client import Client
from onecluster.lab import Lab
from onecluster.network import delete_netns, in_netns, list_netns, new_netns


def lab_host_missing() -> str:
    """Why this host cannot run the lab tier ('' if it can)."""
    if os.geteuid() != 0:
        return "needs root"
    if not Path("/dev/net/tun").exists():
        return "needs /dev/net/tun"
    missing = [t for t in ("ip", "tc", "nsenter", "sysctl") if shutil.which(t) is None]
    return f"needs {', '.join(missing)}" if missing else ""


needs_lab_host = pytest.mark.skipif(bool(lab_host_missing()), reason=lab_host_missing() or "ok")


@pytest.fixture
def netns_pair() -> Iterator[tuple[str, str]]:
    """Two fresh namespaces with their loopback up, deleted afterwards."""
    tag = uuid.uuid4().hex[:6]
    names = (f"octest{tag}a", f"octest{tag}b")
    for name in names:
        new_netns(name)
    yield names
    for name in names:
        if name in list_netns():
            delete_netns(name)


ECHO = """
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], 9000))
print("ready", flush=True)
while True:
    data, peer = s.recvfrom(2048)
    s.sendto(data, peer)
"""

PING = """
import json, socket, sys, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.settimeout(float(sys.argv[3]))
rtts = []
for i in range(int(sys.argv[2])):
    t = time.perf_counter()
    s.sendto(str(i).encode(), (sys.argv[1], 9000))
    try:
        while s.recv(2048) != str(i).encode():
            pass
        rtts.append((time.perf_counter() - t) * 1000)
    except TimeoutError:
        rtts.append(None)
print(json.dumps(rtts))
"""


class Echo:
    """A UDP echo server in one namespace, pinged from another."""

    def __init__(self, server_ns: str, address: str) -> None:
        self.address = address
        self.process = subprocess.Popen(
            in_netns(server_ns, [sys.executable, "-c", ECHO, address]),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.process.stdout is not None
        assert self.process.stdout.readline().strip() == "ready"

    def ping(self, client_ns: str, count: int, timeout_s: float = 0.5) -> list[float | None]:
        import json

        out = subprocess.run(
            in_netns(
                client_ns, [sys.executable, "-c", PING, self.address, str(count), str(timeout_s)]
            ),
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
        result: list[float | None] = json.loads(out.stdout)
        return result

    def close(self) -> None:
        self.process.kill()
        self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


def wait_for(check: Callable[[], bool], timeout: float, what: str) -> float:
    """Poll ``check`` until true; the seconds it took.  Fails the test after ``timeout``."""
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            pytest.fail(f"{what}: not within {timeout} s")
        time.sleep(0.1)
    return time.monotonic() - start


THREE_SITES = Path(__file__).resolve().parents[2] / "examples/fabrics/three-site.yaml"


@contextmanager
def running_lab(fabric: Path = THREE_SITES) -> Iterator[tuple[Lab, Client]]:
    """The lab ``octest`` of ``fabric`` (the three sites by default) at the default scale, and
    an admin client of its server; removed afterwards whatever happened.

    Whatever an earlier run killed half way left of ``octest`` (its namespaces, bridge and
    veth ends) is swept first: the name belongs to the tests, and a leftover made every lab
    test of a later run fail on 'a lab named octest is already on this host'."""
    root = Path(tempfile.gettempdir()) / "onecluster-test-labs"  # the same for every run:
    the_lab = Lab("octest", root=root, environ=dict(os.environ))  # a sweep finds its processes
    the_lab.down_all()
    the_lab.up(fabric, scale=0.05)
    try:
        status = the_lab.status()
        assert status.server_url is not None
        token = status.admin_token_file.read_text().strip()
        with Client(status.server_url, token) as admin:
            yield the_lab, admin
    finally:
        the_lab.down_all()
