"""A lab's teardown when a namespace outlives its deletion (root): the kernel keeps a deleted
namespace while anything holds it — a TCP connection of a killed agent still retransmitting,
for minutes — and with it the host end of its management veth.  ``down-all`` removes that
end, and ``up`` calls it a leftover instead of failing half-way on "File exists"."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.lab.conftest import THREE_SITES, needs_lab_host

from onecluster.errors import ConflictError
from onecluster.lab import Lab
from onecluster.network import (
    add_veth,
    delete_netns,
    link_exists,
    list_netns,
    netns_path,
    new_netns,
)

pytestmark = [pytest.mark.lab, needs_lab_host]


@pytest.fixture
def lingering() -> Iterator[str]:
    """A lab name whose site namespace was deleted but lives on (an open handle holds it,
    as a socket would), its veth's host end ``<name>-m0`` still on the host."""
    name = f"oct{uuid.uuid4().hex[:5]}"
    netns = f"{name}-shanghai"
    new_netns(netns)
    add_veth(f"{name}-m0", "mgmt", peer_netns=netns)
    with netns_path(netns).open("rb"):
        delete_netns(netns)
        yield name
    if link_exists(f"{name}-m0"):
        Lab(name).down_all()


def test_up_calls_the_lingering_end_a_leftover_and_down_all_removes_it(
    lingering: str, tmp_path: Path
) -> None:
    lab = Lab(lingering, root=tmp_path)
    assert f"{lingering}-shanghai" not in list_netns()
    with pytest.raises(ConflictError, match="already on this host"):
        lab.up(THREE_SITES)
    assert f"device {lingering}-m0" in lab.down_all()
    assert not link_exists(f"{lingering}-m0")
