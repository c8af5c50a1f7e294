"""The fabric in force in the database: version 1 from the first server, applies judged
against the version really in force (one at a time), events in the same transaction, a
refusal writes nothing, drains, and the one row replicas read to see any of it."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from sqlalchemy import inspect, text

from onecluster.errors import ConflictError
from onecluster.fabric import Workload
from onecluster.model import JobSpec
from onecluster.store import (
    FabricEpoch,
    FabricRecord,
    NewFabric,
    PlacedPart,
    StartOrder,
    Store,
    make_engine,
    migrate,
)

POOLS = frozenset({("tokyo", "H100"), ("tokyo", "L40S"), ("singapore", "H100")})


def _new(text: str = "v2", *, pools: frozenset[tuple[str, str]] = POOLS) -> NewFabric:
    return NewFabric(
        text=text,
        name="three-site",
        by="alice (admin, token t1)",
        summary=("site osaka added", "pool osaka/H200 added"),
        events=(("fabric_site_added", "site osaka added"), ("fabric_pool_added", "pool added")),
        pools=pools,
    )


def _kinds(store: Store) -> list[str]:
    return [e.kind for e in store.events(limit=1000)]


def test_the_first_server_stores_its_fabric_as_version_1_and_later_ones_read_it(
    store: Store,
) -> None:
    assert store.fabric() is None
    assert store.fabric_epoch() == FabricEpoch(0, 0)
    first = store.adopt_fabric("fabric: a\n", name="a", by="server --fabric", now=5.0)
    assert (first.version, first.text, first.applied_at, first.summary) == (
        1,
        "fabric: a\n",
        5.0,
        (),
    )
    again = store.adopt_fabric("fabric: b\n", name="b", by="server --fabric", now=6.0)
    assert again == first
    assert store.fabric() == first
    assert store.fabric_epoch() == FabricEpoch(1, 1)
    assert _kinds(store) == ["fabric_applied"]


def test_an_apply_writes_the_version_its_events_and_moves_the_epoch(store: Store) -> None:
    store.adopt_fabric("v1", name="three-site", by="server", now=1.0)
    seen: list[tuple[FabricRecord, Workload]] = []

    def decide(current: FabricRecord, work: Workload) -> NewFabric:
        seen.append((current, work))
        return _new()

    record, applied = store.apply_fabric(decide, now=7.0)
    assert applied
    assert (record.version, record.text, record.applied_by) == (2, "v2", "alice (admin, token t1)")
    assert record.summary == ("site osaka added", "pool osaka/H200 added")
    assert [c.version for c, _ in seen] == [1]
    assert store.fabric() == record
    assert store.fabric(1) is not None and store.fabric(1).text == "v1"  # type: ignore[union-attr]
    assert [r.version for r in store.fabric_versions()] == [2, 1]
    assert store.fabric_epoch() == FabricEpoch(2, 2)
    assert _kinds(store) == ["fabric_applied", "fabric_site_added", "fabric_pool_added"]


def test_a_refused_or_empty_change_writes_nothing(store: Store) -> None:
    store.adopt_fabric("v1", name="three-site", by="server", now=1.0)

    def refuse(current: FabricRecord, work: Workload) -> NewFabric:
        msg = "the new fabric would strand work"
        raise ConflictError(msg)

    with pytest.raises(ConflictError, match="strand work"):
        store.apply_fabric(refuse, now=2.0)
    record, applied = store.apply_fabric(lambda current, work: None, now=3.0)
    assert (record.version, applied) == (1, False)
    assert store.fabric_epoch() == FabricEpoch(1, 1)
    assert _kinds(store) == ["fabric_applied"]


def test_the_decision_sees_the_work_that_must_not_be_stranded(store: Store) -> None:
    store.adopt_fabric("v1", name="three-site", by="server", now=1.0)
    running = store.add_job(
        JobSpec(team="speech", gpus=8, duration_s=60.0, command=("true",)), now=1.0
    )
    waiting = store.add_job(
        JobSpec(
            team="llm",
            gpus=16,
            duration_s=60.0,
            command=("true",),
            gpu_types=("H800", "A100"),
            max_sites=2,
            dataset="corpus",
        ),
        now=2.0,
    )
    part = PlacedPart(site="tokyo", gpu_type="L40S", gpus=8, cost_per_gpu_hour=1.0)
    assert store.apply_plan([StartOrder(job_id=running.id, parts=(part,))], [], now=3.0) == (1, 0)
    store.add_scan("corpus", "tokyo", "/data/corpus", now=4.0)
    seen: list[Workload] = []

    def decide(current: FabricRecord, work: Workload) -> None:
        seen.append(work)

    store.apply_fabric(decide, now=5.0)
    [work] = seen
    [attempt] = work.attempts
    assert (attempt.job_id, attempt.team, attempt.site, attempt.gpu_type, attempt.gpus) == (
        running.id,
        "speech",
        "tokyo",
        "L40S",
        8,
    )
    [pending] = work.pending
    assert (pending.job_id, pending.gpu_types, pending.max_sites, pending.dataset) == (
        waiting.id,
        ("H800", "A100"),
        2,
        "corpus",
    )
    assert work.registered == frozenset({"corpus"})
    assert work.transfers == ()


def test_drains_are_kept_idempotent_lifted_and_each_moves_the_epoch(store: Store) -> None:
    store.adopt_fabric("v1", name="three-site", by="server", now=1.0)
    drain, new = store.drain("tokyo", "L40S", by="bob", now=2.0, reason="rack swap")
    assert new and (drain.site, drain.gpu_type, drain.reason) == ("tokyo", "L40S", "rack swap")
    assert store.drain("tokyo", "L40S", by="carol", now=3.0) == (drain, False)
    site, new = store.drain("tokyo", None, by="bob", now=4.0)
    assert new and site.gpu_type is None
    assert [(d.site, d.gpu_type) for d in store.drains()] == [("tokyo", None), ("tokyo", "L40S")]
    assert store.fabric_epoch() == FabricEpoch(1, 3)
    [lifted] = store.undrain("tokyo", "L40S", by="bob", now=5.0)
    assert lifted.gpu_type == "L40S"
    assert store.undrain("tokyo", "L40S", by="bob", now=6.0) == []
    store.drain("tokyo", "H100", by="bob", now=7.0)
    assert [d.gpu_type for d in store.undrain("tokyo", None, by="bob", now=8.0)] == [None, "H100"]
    assert store.drains() == []
    assert _kinds(store)[1:] == [
        "pool_draining",
        "site_draining",
        "pool_undrained",
        "pool_draining",
        "site_undrained",
        "pool_undrained",
    ]


def test_an_apply_lifts_the_drains_of_what_it_removes(store: Store) -> None:
    store.adopt_fabric("v1", name="three-site", by="server", now=1.0)
    store.drain("shanghai", None, by="bob", now=2.0)
    store.drain("tokyo", "L40S", by="bob", now=2.0)
    store.drain("tokyo", "H100", by="bob", now=2.0)
    store.apply_fabric(lambda c, w: _new(pools=frozenset({("tokyo", "H100")})), now=3.0)
    assert [(d.site, d.gpu_type) for d in store.drains()] == [("tokyo", "H100")]


def test_migration_0009_adds_the_tables_and_the_epoch_row(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    from onecluster.store import _engine

    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
    config = Config()
    config.set_main_option("script_location", str(_engine._MIGRATIONS))
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0008")
    assert "fabrics" not in inspect(engine).get_table_names()
    migrate(engine)
    assert {"fabrics", "drains", "fabric_epoch"} <= set(inspect(engine).get_table_names())
    with engine.connect() as conn:
        assert conn.execute(text("SELECT id, version, epoch FROM fabric_epoch")).one() == (1, 0, 0)
    engine.dispose()


@pytest.mark.postgres
def test_two_applies_at_once_run_one_after_the_other(store: Store) -> None:
    if store.engine.dialect.name != "postgresql":
        pytest.skip("SQLite runs one writer at a time anyway")
    store.adopt_fabric("v1", name="three-site", by="server", now=1.0)
    bases: list[int] = []
    second_waits = threading.Event()

    def waiting_for_the_lock() -> bool:
        with store.engine.connect() as conn:
            query = text(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
                "AND datname = current_database()"
            )
            return bool(conn.execute(query).scalar_one())

    def second() -> None:
        store.apply_fabric(lambda c, w: bases.append(c.version) or _new("v3"), now=3.0)

    def first(current: FabricRecord, work: Workload) -> NewFabric:
        bases.append(current.version)
        thread = threading.Thread(target=second)
        thread.start()
        threads.append(thread)
        while not waiting_for_the_lock():  # the second apply waits on the epoch row
            second_waits.wait(0.01)
        return _new("v2")

    threads: list[threading.Thread] = []
    store.apply_fabric(first, now=2.0)
    threads[0].join(timeout=30)
    assert bases == [1, 2]
    assert [r.text for r in store.fabric_versions()] == ["v3", "v2", "v1"]
