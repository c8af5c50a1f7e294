"""The register: appends are durable and signed, entries read back as written, proofs
check with ``onecluster.export.merkle``, and concurrent appends share batches."""

from __future__ import annotations

import base64
import json
import stat
import threading
from pathlib import Path

import pytest

from onecluster.clock import ManualClock
from onecluster.errors import (
    ConflictError,
    IntegrityError,
    NotFoundError,
    StorageError,
    ValidationError,
)
from onecluster.export import merkle
from onecluster.register import Register, SignedHead, read_public_key, verify

from .conftest import intent


def test_append_returns_a_receipt_covered_by_a_signed_head(register: Register) -> None:
    receipt = register.append(intent(1))
    assert receipt.seq == 0
    assert receipt.leaf_hash == merkle.leaf_hash(register.entry_bytes(0))
    assert receipt.head == register.head()
    assert receipt.head.size == register.size == 1
    receipt.head.verify(register.public_key())
    merkle.verify_inclusion(0, 1, receipt.leaf_hash, register.inclusion_proof(0), receipt.head.root)


def test_entries_carry_seq_and_at_and_are_canonical(register: Register, clock: ManualClock) -> None:
    register.append({"type": "intent", "名": "数据", "n": 1.5, "z": None, "a": [True, {"b": 2}]})
    clock.advance(1.25)
    register.append({"type": "complete"})
    first, second = register.entries()
    assert first["seq"] == 0 and first["at"] == "2026-11-20T12:00:00.000000Z"
    assert second["seq"] == 1 and second["at"] == "2026-11-20T12:00:01.250000Z"
    assert (
        register.entry_bytes(0)
        == (
            '{"a":[true,{"b":2}],"at":"2026-11-20T12:00:00.000000Z","n":1.5,"seq":0,'
            '"type":"intent","z":null,"名":"数据"}'
        ).encode()
    )
    assert register.entries(1) == [second] and register.entries(0, 1) == [first]
    assert register.entries(2, 2) == []


def test_the_caller_s_entry_is_not_changed(register: Register) -> None:
    entry = {"type": "intent"}
    register.append(entry)
    assert entry == {"type": "intent"}


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ([1, 2], "must be a JSON object"),
        ({"seq": 3}, "must not carry 'seq'"),
        ({"at": "now"}, "must not carry 'at'"),
        ({"x": float("nan")}, "JSON cannot hold"),
        ({"x": (1, 2)}, "tuple, not a JSON value"),
        ({"x": {1: "a"}}, "not a string"),
        ({"x": b"raw"}, "bytes, not a JSON value"),
        ({"x": {"y": [object()]}}, "entry['x']['y'][0]"),
    ],
)
def test_entries_that_are_not_json_objects_are_refused(
    register: Register, entry: object, words: str
) -> None:
    with pytest.raises(ValidationError, match=words.replace("[", r"\[").replace("(", r"\(")):
        register.append(entry)  # type: ignore[arg-type]
    assert register.size == 0


def test_time_never_goes_backwards_in_the_log(register: Register, clock: ManualClock) -> None:
    clock.set(clock.now() + 10)
    register.append({"n": 1})
    clock._now -= 5  # a wall clock stepped back (NTP)
    register.append({"n": 2})
    first, second = register.entries()
    assert second["at"] == first["at"]
    assert register.head().timestamp >= second["at"]


def test_reopen_keeps_everything(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "r"
    with Register.open(directory, clock=clock, group_wait_s=0) as reg:
        receipts = [reg.append(intent(n)) for n in range(5)]
        head, key = reg.head(), reg.public_key()
    with Register.open(directory, clock=clock) as reg:
        assert reg.size == 5 and reg.head() == head and reg.public_key() == key
        assert [e["export"] for e in reg.entries()] == [f"exp-{n}" for n in range(5)]
        assert reg.append(intent(5)).seq == 5
        for r in receipts:
            merkle.verify_inclusion(
                r.seq, 6, r.leaf_hash, reg.inclusion_proof(r.seq), reg.head().root
            )
        merkle.verify_consistency(5, 6, reg.consistency_proof(5), head.root, reg.head().root)
    assert verify(directory).entries_checked == 6


def test_the_directory_holds_the_documented_files(tmp_path: Path, clock: ManualClock) -> None:
    with Register.open(tmp_path / "r", clock=clock, group_wait_s=0) as reg:
        reg.append(intent(1))
        pub = reg.public_key()
    names = {p.name for p in (tmp_path / "r").iterdir()}
    assert names == {
        "entries.jsonl",
        "checkpoints.jsonl",
        "pending.json",
        "public.key",
        "signing.key",
    }
    pending = (tmp_path / "r" / "pending.json").read_bytes()
    assert pending.split(b"\n")[0] == b""  # no batch in flight
    assert stat.S_IMODE((tmp_path / "r" / "signing.key").stat().st_mode) == 0o600
    assert read_public_key(tmp_path / "r" / "public.key") == pub
    lines = (tmp_path / "r" / "checkpoints.jsonl").read_text().splitlines()
    empty, one = (json.loads(line) for line in lines)
    assert empty["size"] == 0 and empty["leaves"] == []
    assert set(one) == {"leaves", "origin", "root", "signature", "size", "timestamp"}
    assert one["size"] == 1 and len(one["leaves"]) == 1 and len(one["root"]) == 64


def test_a_signed_head_is_a_c2sp_checkpoint(register: Register) -> None:
    register.append(intent(1))
    head = register.head()
    origin, size, root, extension, end = head.note().split("\n")
    assert (origin, size, end) == ("onecluster export register", "1", "")
    assert extension == f"timestamp {head.timestamp}"
    assert len(base64.b64decode(root)) == merkle.DIGEST_SIZE
    forged = SignedHead(head.origin, 2, head.root, head.signature, head.timestamp)
    with pytest.raises(IntegrityError, match="size 2"):
        forged.verify(register.public_key())
    with pytest.raises(IntegrityError):
        head.verify(bytes(32))


def test_proofs_at_every_size_verify_with_the_merkle_module(register: Register) -> None:
    heads = []
    for n in range(12):
        heads.append(register.append(intent(n)).head)
    leaves = [merkle.leaf_hash(register.entry_bytes(s)) for s in range(12)]
    for head in heads:
        for seq in range(head.size):
            proof = register.inclusion_proof(seq, head.size)
            merkle.verify_inclusion(seq, head.size, leaves[seq], proof, head.root)
        for older in heads[: heads.index(head)]:
            proof = register.consistency_proof(older.size, head.size)
            merkle.verify_consistency(older.size, head.size, proof, older.root, head.root)
    with pytest.raises(NotFoundError):
        register.inclusion_proof(12)
    with pytest.raises(ValidationError):
        register.inclusion_proof(0, 13)
    with pytest.raises(ValidationError):
        register.consistency_proof(5, 13)
    with pytest.raises(NotFoundError):
        register.entry_bytes(12)
    with pytest.raises(ValidationError):
        register.entries(3, 20)


def test_group_commit_batches_concurrent_appends(tmp_path: Path) -> None:
    directory = tmp_path / "r"
    threads_n, per_thread = 8, 200
    receipts: list[list[object]] = [[] for _ in range(threads_n)]
    with Register.open(directory) as reg:
        barrier = threading.Barrier(threads_n)

        def run(t: int) -> None:
            barrier.wait()
            for i in range(per_thread):
                receipts[t].append(reg.append({"thread": t, "i": i}))

        threads = [threading.Thread(target=run, args=(t,)) for t in range(threads_n)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        total = threads_n * per_thread
        assert reg.size == total
        head = reg.head()
        seqs = sorted(r.seq for rs in receipts for r in rs)  # type: ignore[attr-defined]
        assert seqs == list(range(total))
        for rs in receipts:
            for r in rs:
                # durable when it returned: its head covers it, and the proof holds today
                assert r.head.size > r.seq  # type: ignore[attr-defined]
                proof = reg.inclusion_proof(r.seq)  # type: ignore[attr-defined]
                merkle.verify_inclusion(r.seq, total, r.leaf_hash, proof, head.root)  # type: ignore[attr-defined]
        # each thread's entries in its own order
        for t in range(threads_n):
            mine = [e["i"] for e in reg.entries() if e["thread"] == t]
            assert mine == list(range(per_thread))
    checkpoints = (directory / "checkpoints.jsonl").read_text().splitlines()
    assert len(checkpoints) - 1 < total  # fewer checkpoints than entries: batches
    sizes = [json.loads(c)["size"] for c in checkpoints]
    assert sizes == sorted(sizes) and sizes[-1] == total
    assert verify(directory).entries_checked == total


def test_a_register_is_owned_by_one_object(tmp_path: Path, register: Register) -> None:
    with pytest.raises(ConflictError, match="open in another"):
        Register.open(tmp_path / "register")


def test_closed_register_refuses_appends(tmp_path: Path, clock: ManualClock) -> None:
    reg = Register.open(tmp_path / "r", clock=clock)
    reg.close()
    reg.close()
    with pytest.raises(StorageError, match="closed"):
        reg.append({"n": 1})
    with Register.open(tmp_path / "r") as again:  # the lock was released
        assert again.size == 0


def test_another_origin_is_refused(tmp_path: Path) -> None:
    Register.open(tmp_path / "r").close()
    with pytest.raises(ValidationError, match="not 'other'"):
        Register.open(tmp_path / "r", origin="other")


def test_a_public_key_that_is_not_the_signing_key_s_is_refused(tmp_path: Path) -> None:
    Register.open(tmp_path / "a").close()
    Register.open(tmp_path / "b").close()
    (tmp_path / "b" / "public.key").replace(tmp_path / "a" / "public.key")
    with pytest.raises(IntegrityError, match=r"not the public key of signing\.key"):
        Register.open(tmp_path / "a")


def test_a_lost_signing_key_is_not_silently_replaced(tmp_path: Path) -> None:
    with Register.open(tmp_path / "r") as reg:
        reg.append({"n": 1})
    (tmp_path / "r" / "signing.key").unlink()
    with pytest.raises(IntegrityError, match=r"no signing\.key"):
        Register.open(tmp_path / "r")


def test_the_root_of_any_earlier_size_is_the_rfc_head_of_those_entries(tmp_path: Path) -> None:
    with Register.open(tmp_path / "r", clock=ManualClock(1_780_000_000.0), group_wait_s=0) as reg:
        for n in range(11):
            reg.append(intent(n))
        leaves = [reg.entry_bytes(seq) for seq in range(reg.size)]
        for size in range(reg.size + 1):
            assert reg.root(size) == merkle.root(leaves[:size])
        assert reg.root() == reg.head().root
        with pytest.raises(ValidationError, match="no tree of 12 entries"):
            reg.root(12)
