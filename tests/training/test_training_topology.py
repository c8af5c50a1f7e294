"""The gang as a worker reads it from its environment, and the sync config's checks."""

from __future__ import annotations

import pytest

from onecluster.errors import ValidationError
from onecluster.training import SyncConfig, Topology


def test_the_server_and_launcher_variables_make_the_topology() -> None:
    topo = Topology.from_env(
        {
            "ONECLUSTER_GANG_SITES": "shanghai,tokyo",
            "ONECLUSTER_GANG_RANK": "1",
            "ONECLUSTER_GANG_ADDRESSES": "shanghai=10.211.0.1,tokyo=10.211.0.3",
            "ONECLUSTER_GANG_PORT": "30720",
            "LOCAL_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
        }
    )
    assert topo.site == "tokyo"
    assert topo.address(0) == "10.211.0.1"
    assert topo.port(0) == 30721  # worker 1 of shanghai
    assert topo.port(1, 0) == 30736
    assert topo.site_port() == 30720 + 241


def test_a_site_without_an_address_is_on_this_host() -> None:
    topo = Topology.from_env(
        {
            "ONECLUSTER_GANG_SITES": "a,b",
            "ONECLUSTER_GANG_RANK": "0",
            "ONECLUSTER_GANG_ADDRESSES": "",
            "ONECLUSTER_GANG_PORT": "30720",
        }
    )
    assert topo.address(1) == "127.0.0.1"


def test_without_gang_variables_a_worker_is_a_one_site_run() -> None:
    topo = Topology.from_env({"ONECLUSTER_SITE": "tokyo"})
    assert topo.sites == ("tokyo",) and topo.site_rank == 0


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"ONECLUSTER_GANG_SITES": "a,b"}, "ONECLUSTER_GANG_RANK is not set"),
        ({"ONECLUSTER_GANG_SITES": "a,b", "ONECLUSTER_GANG_RANK": "2"}, "site rank 2"),
        ({"ONECLUSTER_GANG_SITES": "a,a", "ONECLUSTER_GANG_RANK": "0"}, "appears twice"),
        ({"ONECLUSTER_GANG_SITES": "a", "ONECLUSTER_GANG_RANK": "x"}, "not a whole number"),
        (
            {
                "ONECLUSTER_GANG_SITES": "a",
                "ONECLUSTER_GANG_RANK": "0",
                "ONECLUSTER_GANG_ADDRESSES": "a",
            },
            "SITE=ADDRESS",
        ),
        (
            {"ONECLUSTER_GANG_SITES": "a", "ONECLUSTER_GANG_RANK": "0", "LOCAL_RANK": "1"},
            "local rank 1",
        ),
        (
            {
                "ONECLUSTER_GANG_SITES": "a",
                "ONECLUSTER_GANG_RANK": "0",
                "ONECLUSTER_GANG_PORT": "65500",
            },
            "no room",
        ),
    ],
)
def test_a_malformed_environment_names_the_variable(env: dict[str, str], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        Topology.from_env(env)


@pytest.mark.parametrize(
    ("changes", "says"),
    [
        ({"bits": 3}, "bits is 3"),
        ({"sync_every": 0}, "sync_every"),
        ({"fragments": 7, "sync_every": 5}, "fragments"),
        ({"mode": "ddp", "sync_every": 5}, "every step"),
        ({"peer_timeout_s": 0.5, "heartbeat_s": 0.5}, "two heartbeats"),
        ({"sync_timeout_s": float("inf")}, "sync_timeout_s"),
        ({"outer_momentum": 1.0}, "outer_momentum"),
    ],
)
def test_a_sync_config_that_cannot_work_is_refused(changes: dict[str, object], says: str) -> None:
    with pytest.raises(ValidationError, match=says):
        SyncConfig(**changes)  # type: ignore[arg-type]


def test_the_digest_changes_with_the_model_or_the_rules_but_not_the_timeouts() -> None:
    shapes = [("w", (4, 4))]
    base = SyncConfig().digest(shapes)
    assert SyncConfig(peer_timeout_s=30).digest(shapes) == base
    assert SyncConfig(sync_every=50).digest(shapes) != base
    assert SyncConfig().digest([("w", (4, 5))]) != base
