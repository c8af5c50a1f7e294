"""The export register in the database: registers of two replicas append to one chain, the
database refuses an index written twice or a deposed leader's write, and rows tampered
with are named by opening and by ``export verify`` of a copy, as edited files are."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
import sqlalchemy.exc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from sqlalchemy import delete, insert, text, update

from onecluster.clock import ManualClock
from onecluster.errors import ConflictError, IntegrityError, StorageError
from onecluster.register import Register, SignedHead, public_bytes, verify, write_directory
from onecluster.register._files import checkpoint_line, parse_checkpoint
from onecluster.store import Store, fenced
from onecluster.store._register_rows import RegisterCheckpointRow, RegisterEntryRow, Tail

NOVEMBER = 1_795_000_000.0


def intent(n: int) -> dict[str, object]:
    return {"type": "intent", "export": f"exp-{n}", "dataset": "notes", "bytes": 1000 + n}


@pytest.fixture
def key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def _open(store: Store, key: Ed25519PrivateKey, clock: ManualClock | None = None) -> Register:
    store.claim_register_key(public_bytes(key))
    return Register.open_on(
        store.register_log(), key, clock=clock or ManualClock(NOVEMBER), group_wait_s=0
    )


def _with_one_entry(store: Store, key: Ed25519PrivateKey) -> tuple[Register, Tail]:
    """A register holding one entry, and its rows then."""
    register = _open(store, key)
    register.append(intent(0))
    return register, store.register_log().load()


def _copy(store: Store, key: Ed25519PrivateKey, out: Path) -> Path:
    entries, lines = store.register_log().load()
    write_directory(out, public_bytes(key), entries, lines)
    return out


def _history(store: Store, key: Ed25519PrivateKey) -> None:
    """20 entries: 0–9 one per batch, 10–19 from ten threads at once (batches of several)."""
    clock = ManualClock(NOVEMBER)
    with _open(store, key, clock) as register:
        for n in range(10):
            register.append(intent(n))
            clock.advance(60)
        threads = [
            threading.Thread(target=register.append, args=(intent(n),)) for n in range(10, 20)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert register.size == 20


def test_two_replicas_registers_append_to_one_chain_that_verifies(
    store: Store, key: Ed25519PrivateKey, tmp_path: Path
) -> None:
    a, b = _open(store, key), _open(store, key)
    assert [a.append(intent(n)).seq for n in range(3)] == [0, 1, 2]
    assert b.size == 0  # b has not looked yet: its next batch takes a's entries in first
    assert b.append(intent(3)).seq == 3
    assert a.append(intent(4)).seq == 4
    assert b.refresh() == 1 and b.size == a.size == 5
    assert b.head() == a.head()
    assert [e["export"] for e in b.entries()] == [f"exp-{n}" for n in range(5)]
    report = verify(_copy(store, key, tmp_path / "copy"), public_key=public_bytes(key))
    assert (report.size, report.entries_checked) == (5, 5)
    a.close()
    b.close()


def test_replicas_appending_at_once_never_write_one_index_twice(
    store: Store, key: Ed25519PrivateKey, tmp_path: Path
) -> None:
    registers = [_open(store, key), _open(store, key)]
    seqs: list[int] = []
    errors: list[BaseException] = []

    def run(register: Register, n: int) -> None:
        try:
            seqs.append(register.append(intent(n)).seq)
        except BaseException as exc:  # noqa: BLE001 - reported by the assert
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(registers[n % 2], n)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert sorted(seqs) == list(range(16))
    assert verify(_copy(store, key, tmp_path / "copy")).size == 16
    for register in registers:
        register.close()


def test_the_database_refuses_a_batch_numbered_from_an_index_already_written(
    store: Store, key: Ed25519PrivateKey
) -> None:
    register, before = _with_one_entry(store, key)

    def stale(more: list[bytes], lines: list[bytes]) -> tuple[int, list[bytes], list[bytes], bytes]:
        return 0, [b'{"seq":0}'], [b"\0" * 32], lines[-1] if lines else b"{}"

    with pytest.raises(StorageError, match="numbered from 0"):
        store.register_log().write(0, 0, stale)
    with store.engine.begin() as conn, pytest.raises(sqlalchemy.exc.IntegrityError):
        conn.execute(insert(RegisterEntryRow).values(seq=0, data=b"{}"))
    assert store.register_log().load() == before
    register.close()


def test_a_deposed_leaders_append_is_refused_and_nothing_is_written(
    store: Store, key: Ed25519PrivateKey
) -> None:
    register, before = _with_one_entry(store, key)
    with fenced(99, "a-deposed-leader"), pytest.raises(StorageError):
        register.append(intent(1))
    assert store.register_log().load() == before
    with pytest.raises(StorageError, match="refuses entries"):
        register.append(intent(1))  # failed until it reloads from the database
    register.refresh()
    assert register.append(intent(1)).seq == 1
    register.close()


def test_a_register_signed_with_another_key_is_refused_at_open(
    store: Store, key: Ed25519PrivateKey
) -> None:
    _open(store, key).close()
    with pytest.raises(IntegrityError, match="bad signature"):
        Register.open_on(store.register_log(), Ed25519PrivateKey.generate())


# -- rows tampered with --------------------------------------------------------------------


def _resign(store: Store, position: int) -> None:
    with store.engine.begin() as conn:
        line = conn.execute(
            text("SELECT line FROM register_checkpoints WHERE position = :p"), {"p": position}
        ).scalar_one()
        stored = parse_checkpoint(bytes(line))
        assert stored is not None
        head = stored.head
        other = Ed25519PrivateKey.generate().sign(head.note().encode())
        forged = SignedHead(head.origin, head.size, head.root, other, head.timestamp)
        conn.execute(
            update(RegisterCheckpointRow)
            .where(RegisterCheckpointRow.position == position)
            .values(line=checkpoint_line(forged, list(stored.leaves))[:-1])
        )


def _edit_entry(store: Store) -> int:
    with store.engine.begin() as conn:
        data = conn.execute(text("SELECT data FROM register_entries WHERE seq = 12")).scalar_one()
        edited = bytes(data).replace(b"notes", b"nites")
        conn.execute(update(RegisterEntryRow).where(RegisterEntryRow.seq == 12).values(data=edited))
    return 12


def _delete_entry(store: Store) -> int:
    with store.engine.begin() as conn:
        conn.execute(delete(RegisterEntryRow).where(RegisterEntryRow.seq == 15))
    return 15


def _delete_checkpoint(store: Store) -> int:
    with store.engine.begin() as conn:
        conn.execute(delete(RegisterCheckpointRow).where(RegisterCheckpointRow.position == 4))
    return 3  # checkpoint 4 covered entry 3 (position 0 is the empty tree's head)


def _resign_checkpoint(store: Store) -> int:
    _resign(store, 6)
    return 5


def _add_entry(store: Store) -> int:
    with store.engine.begin() as conn:
        conn.execute(insert(RegisterEntryRow).values(seq=20, data=b'{"seq":20,"type":"intent"}'))
    return 20


@pytest.mark.parametrize(
    "tamper", [_edit_entry, _delete_entry, _delete_checkpoint, _resign_checkpoint, _add_entry]
)
def test_rows_tampered_with_are_named_at_open_and_by_verify(
    store: Store, key: Ed25519PrivateKey, tmp_path: Path, tamper: Callable[[Store], int]
) -> None:
    _history(store, key)
    seq = tamper(store)
    with pytest.raises(IntegrityError, match=rf"entry {seq}\b"):
        Register.open_on(store.register_log(), key)
    with pytest.raises(IntegrityError, match=rf"entry {seq}\b"):
        verify(_copy(store, key, tmp_path / "copy"), public_key=public_bytes(key))


def test_rows_added_behind_a_live_registers_back_are_refused_at_its_next_refresh(
    store: Store, key: Ed25519PrivateKey
) -> None:
    register = _open(store, key)
    register.append(intent(0))
    _add_entry_at(store, 1)
    with pytest.raises(IntegrityError, match=r"entry 1\b"):
        register.refresh()
    with pytest.raises(StorageError):
        register.append(intent(2))  # it refuses from then on
    register.close()


def _add_entry_at(store: Store, seq: int) -> None:
    with store.engine.begin() as conn:
        conn.execute(insert(RegisterEntryRow).values(seq=seq, data=b'{"seq":1}'))
        conn.execute(
            insert(RegisterCheckpointRow).values(position=2, line=b'{"not":"a checkpoint"}')
        )


def test_a_register_is_imported_only_into_an_empty_database_register(
    store: Store, key: Ed25519PrivateKey
) -> None:
    _open(store, key).close()
    with pytest.raises(ConflictError, match="only into an empty one"):
        store.import_register(public_bytes(key), [], [])


def test_a_read_while_another_replica_appends_is_one_consistent_log(
    store: Store, key: Ed25519PrivateKey
) -> None:
    """Each read of the log is one state of it: every entry its checkpoints cover and none
    they do not, although batches (entries, checkpoint, counts) commit between statements
    (PostgreSQL's READ COMMITTED)."""
    from onecluster.register._check import check_log

    writer = _open(store, key)
    done = threading.Event()

    def append() -> None:
        try:
            for n in range(150):
                writer.append(intent(n))
        finally:
            done.set()

    thread = threading.Thread(target=append)
    thread.start()
    reads = 0
    try:
        while not done.is_set() or reads == 0:
            entries, lines = store.register_log().load()
            checked = check_log(entries, lines, public_bytes(key))
            assert checked.covered == len(entries), f"read {reads}: an uncovered tail"
            reads += 1
    finally:
        thread.join()
        writer.close()
    assert reads > 1
