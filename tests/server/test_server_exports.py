"""Audited exports end to end: the server, three real data planes on loopback (the agents'
``SiteData``), real tokens of every role, and the register on disk.

Shanghai controls exports; Singapore and Tokyo do not.  A push out of Shanghai is refused
and recorded; an export under an approval is de-identified at Shanghai, written to the
register, sent, and arrives de-identified with the hash its entry records; the entry's
inclusion proof verifies against the signed head; a register row tampered with in the
database is named by ``export verify`` of a copy, and refuses every export.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from sqlalchemy import text as sql

from onecluster.agent._data import SiteData
from onecluster.client import Client
from onecluster.errors import ConflictError, ForbiddenError, IntegrityError, UnavailableError
from onecluster.export import find, merkle
from onecluster.register import verify
from onecluster.schema import ApprovalIn, DatasetAdd, ExportIn, JobSubmit, PushIn, RevokeIn
from onecluster.server import copy_register
from onecluster.store import Store

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = pytest.mark.integration

KEY = b"a test key of more than sixteen bytes"
_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def resident_id(body: str) -> str:
    """A mainland resident ID with its MOD 11-2 check character."""
    total = sum(int(c) * w for c, w in zip(body, _WEIGHTS, strict=True))
    return body + "10X98765432"[total % 11]


PEOPLE = [
    (resident_id(f"1101051980{m:02d}15{n:03d}"), f"13{m}{n:08d}", f"user{n}@example.com")
    for m, n in ((1, 11), (2, 22), (3, 33), (4, 44), (5, 55))
]


@pytest.fixture
def planes(tmp_path: Path) -> Iterator[dict[str, SiteData]]:
    made = {
        site: SiteData(
            site,
            tmp_path / "planes" / site,
            address="127.0.0.1",
            deid_key=KEY if site == "shanghai" else None,
        )
        for site in ("shanghai", "singapore", "tokyo")
    }
    yield made
    for plane in made.values():
        plane.close()


def _round(server: RunningServer, planes: dict[str, SiteData]) -> None:
    for site, plane in planes.items():
        plane.apply(server.sync(site, data=plane.report()).data)
    server.step()


def _until(server: RunningServer, planes: dict[str, SiteData], done: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 60
    while not done():
        assert time.monotonic() < deadline, "the exports did not get there"
        _round(server, planes)
        time.sleep(0.05)


def patients(top: Path) -> Path:
    """A CSV and a JSON Lines file full of identifiers, with a profile's columns."""
    top.mkdir(parents=True)
    lines = ["name,resident_id,mobile,note,amount"]
    for i, (rid, mobile, email) in enumerate(PEOPLE):
        lines.append(f"person {i},{rid},{mobile},write to {email} please,{100 + i}")
    (top / "patients.csv").write_text("\n".join(lines) + "\n")
    with (top / "visits.jsonl").open("w") as out:
        for i, (rid, mobile, email) in enumerate(PEOPLE):
            record = {
                "name": f"person {i}",
                "resident_id": rid,
                "mobile": mobile,
                "note": f"复诊，身份证{rid}，邮箱{email}",
                "amount": 3,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
    return top


PROFILE = """
version: 1
fields:
  name: {action: drop}
  resident_id: {action: pseudonym, kind: cn_resident_id, subject: true}
  mobile: {action: mask}
"""


def _register_dataset(server: RunningServer, planes: dict[str, SiteData], tree: Path) -> str:
    admin = server.admin()
    scan = admin.add_dataset(DatasetAdd(name="patients", site="shanghai", path=str(tree)))
    _until(server, planes, lambda: admin.scan(scan.id).state in ("done", "failed"))
    done = admin.scan(scan.id)
    assert done.state == "done" and done.root is not None, done.error
    return done.root


def _people(server: RunningServer) -> tuple[Client, Client, Client, Client]:
    """A member (alice), two compliance officers (bob; alice's own compliance token) and an
    auditor."""
    member = server.client(server.token(role="member", team="llm", holder="alice"))
    bob = server.client(server.token(role="compliance", holder="bob"))
    alice_compliance = server.client(server.token(role="compliance", holder="alice"))
    auditor = server.client(server.token(role="auditor", holder="carol"))
    return member, bob, alice_compliance, auditor


def _approval_body(**changes: object) -> ApprovalIn:
    fields: dict[str, object] = {
        "dataset": "patients",
        "destinations": ["singapore"],
        "purpose": "fine-tune the triage model",
        "categories": ["general-pi"],
        "personal": True,
        "route": "standard_contract",
        "route_ref": "SC-2026-0042",
        "profile": PROFILE,
        "valid_until": 1_790_000_000.0,
        "max_bytes": 10_000_000,
    }
    fields.update(changes)
    return ApprovalIn.model_validate(fields)


def _entries(client: Client) -> list[dict[str, object]]:
    page = client.register_entries()
    return [json.loads(text) for text in page.entries]


def test_a_push_out_of_shanghai_is_refused_recorded_and_nothing_arrives(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    root = _register_dataset(server, planes, patients(tmp_path / "patients"))
    member, *_, auditor = _people(server)
    with pytest.raises(ForbiddenError, match="controls exports"):
        member.push(PushIn.model_validate({"dataset": "patients", "to": "singapore"}))
    with pytest.raises(ForbiddenError, match="there is no approval"):
        member.start_export(ExportIn(dataset="patients", to="singapore", approval="a-none"))
    for _ in range(3):
        _round(server, planes)
    assert member.transfers(state="all") == []
    [version] = member.dataset("patients").versions
    assert {r.site for r in version.replicas} == {"shanghai"}
    refused = _entries(auditor)
    assert [(e["type"], e["via"], e["destination"]) for e in refused] == [
        ("refused", "push", "singapore"),
        ("refused", "export", "singapore"),
    ]
    assert refused[0]["version"] == root and "alice" in str(refused[0]["requester"])
    # Into Shanghai, and between the other two, data moves freely.
    assert server.admin().push(PushIn.model_validate({"dataset": "patients", "to": "shanghai"}))


def test_an_approved_export_arrives_de_identified_with_the_hash_its_entry_records(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    tree = patients(tmp_path / "patients")
    source_root = _register_dataset(server, planes, tree)
    member, bob, alice_compliance, auditor = _people(server)
    asked = member.request_approval(_approval_body())
    assert asked.state == "requested" and asked.requester.startswith("alice (member")
    with pytest.raises(ForbiddenError, match="nobody approves their own request"):
        alice_compliance.approve(asked.id)
    with pytest.raises(ForbiddenError, match="needs compliance"):
        member.approve(asked.id)
    with pytest.raises(ForbiddenError, match="is requested, not approved"):
        member.start_export(ExportIn(dataset="patients", to="singapore", approval=asked.id))
    approved = bob.approve(asked.id)
    assert approved.approver is not None and approved.approver.startswith("bob (compliance")
    with pytest.raises(ForbiddenError, match="not to tokyo"):
        member.start_export(ExportIn(dataset="patients", to="tokyo", approval=asked.id))

    export = member.start_export(ExportIn(dataset="patients", to="singapore", approval=asked.id))
    assert export.state == "preparing"
    _until(server, planes, lambda: member.export(export.id).state in ("done", "failed", "refused"))
    _round(server, planes)  # singapore lists its replica
    done = member.export(export.id)
    assert done.state == "done", done.error
    assert done.content_hash is not None and done.content_hash != source_root
    assert done.individuals == len(PEOPLE)

    # What arrived is the de-identified copy: no planted identifier survives in any file.
    [version] = member.dataset("patients-deid").versions
    assert version.root == done.content_hash
    arrived = next(r for r in version.replicas if r.site == "singapore")
    assert arrived.state == "complete" and arrived.path is not None
    texts = {p.name: p.read_text() for p in Path(arrived.path).rglob("*") if p.is_file()}
    assert sorted(texts) == ["patients.csv", "visits.jsonl"]
    for rid, mobile, email in PEOPLE:
        for text in texts.values():
            assert rid not in text and mobile not in text and email not in text
    for text in texts.values():
        assert find(text) == []
    assert "person 0" not in texts["patients.csv"]  # the name column was dropped

    # The register: intent then complete, and the intent's hash is what arrived.
    entries = _entries(auditor)
    intent = next(e for e in entries if e["type"] == "intent" and e["export"] == export.id)
    complete = next(e for e in entries if e["type"] == "complete" and e["export"] == export.id)
    assert intent["content_hash"] == done.content_hash == complete["content_hash"]
    assert intent["requester"] == done.requester and str(intent["approver"]).startswith("bob")
    assert (intent["approval"], intent["route_ref"], intent["bytes"]) == (
        asked.id,
        "SC-2026-0042",
        version.bytes,
    )
    assert int(str(intent["seq"])) < int(str(complete["seq"]))

    # The intent's inclusion proof verifies against the signed head, under its key.
    head = auditor.register_head()
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(head.public_key))
    key.verify(base64.b64decode(head.signature), head.note.encode())
    seq = int(str(intent["seq"]))
    proof = auditor.register_proof(seq=seq)
    assert proof.root == head.root
    leaf = auditor.register_entries(first=seq, limit=1).entries[0].encode()
    merkle.verify_inclusion(
        seq,
        head.size,
        merkle.leaf_hash(leaf),
        [bytes.fromhex(p) for p in proof.proof],
        bytes.fromhex(head.root),
    )
    assert member.approval(asked.id).bytes_used == version.bytes


def test_refusals_of_a_revoked_expired_or_used_up_approval_are_recorded(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    _register_dataset(server, planes, patients(tmp_path / "patients"))
    member, bob, _, auditor = _people(server)
    tiny = bob.approve(member.request_approval(_approval_body(max_bytes=10)).id)
    revoked = bob.approve(member.request_approval(_approval_body()).id)
    bob.revoke(revoked.id, RevokeIn(reason="the contract was withdrawn"))
    with pytest.raises(ConflictError, match="already revoked"):
        bob.revoke(revoked.id, RevokeIn(reason="again"))
    with pytest.raises(ForbiddenError, match="revoked, not approved: the contract was withdrawn"):
        member.start_export(ExportIn(dataset="patients", to="singapore", approval=revoked.id))
    # Over its byte limit: found once the de-identified copy's size is known.
    export = member.start_export(ExportIn(dataset="patients", to="singapore", approval=tiny.id))
    _until(server, planes, lambda: member.export(export.id).state != "preparing")
    over = member.export(export.id)
    assert over.state == "refused" and over.error is not None and "allows 10 bytes" in over.error
    assert over.transfer is None
    once = bob.approve(member.request_approval(_approval_body(valid_until=1_780_000_100.0)).id)
    server.clock.advance(200)
    with pytest.raises(ForbiddenError, match="expired"):
        member.start_export(ExportIn(dataset="patients", to="singapore", approval=once.id))
    reasons = [str(e["reason"]) for e in _entries(auditor) if e["type"] == "refused"]
    assert len(reasons) == 3
    assert "revoked" in reasons[0] and "allows 10 bytes" in reasons[1] and "expired" in reasons[2]
    arrived = [r for d in member.datasets() for v in d.versions for r in v.replicas]
    assert not any(r.site == "singapore" for r in arrived)


def test_a_byte_edited_in_the_database_register_is_named_by_verify_and_at_start(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    _register_dataset(server, planes, patients(tmp_path / "patients"))
    member, *_ = _people(server)
    for _ in range(3):
        with pytest.raises(ForbiddenError):
            member.push(PushIn.model_validate({"dataset": "patients", "to": "singapore"}))
    server.stop()
    store = Store.open(server.config.database_url)
    assert copy_register(store, tmp_path / "copy") == 3
    assert verify(tmp_path / "copy").size == 3
    with store.engine.begin() as conn:
        data = conn.execute(sql("SELECT data FROM register_entries WHERE seq = 1")).scalar_one()
        edited = bytearray(data)
        edited[edited.index(b"singapore")] = ord("S")
        conn.execute(
            sql("UPDATE register_entries SET data = :d WHERE seq = 1"), {"d": bytes(edited)}
        )
    copy_register(store, tmp_path / "edited")
    store.close()
    with pytest.raises(IntegrityError, match=r"entry 1\b"):
        verify(tmp_path / "edited")
    server.start()  # and the server refuses every export, naming the entry
    member, *_ = _people(server)
    with pytest.raises(ForbiddenError, match=r"cannot be used: entry 1\b"):
        member.push(PushIn.model_validate({"dataset": "patients", "to": "singapore"}))


def test_a_malformed_row_refuses_the_export_naming_it_and_nothing_is_sent(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    tree = patients(tmp_path / "patients")
    with (tree / "patients.csv").open("a") as out:
        out.write('person 9,"unclosed,13900000000\n')
    _register_dataset(server, planes, tree)
    member, bob, _, auditor = _people(server)
    approval = bob.approve(member.request_approval(_approval_body()).id)
    export = member.start_export(ExportIn(dataset="patients", to="singapore", approval=approval.id))
    _until(server, planes, lambda: member.export(export.id).state != "preparing")
    refused = member.export(export.id)
    assert refused.state == "refused" and refused.transfer is None
    assert refused.error is not None and "patients.csv" in refused.error
    assert "line 7" in refused.error or "row" in refused.error, refused.error
    assert member.transfers(state="all") == []
    [entry] = [e for e in _entries(auditor) if e["export"] == export.id]
    assert entry["type"] == "refused" and "patients.csv" in str(entry["reason"])
    # Nothing de-identified is left behind at Shanghai either.
    assert not any((tmp_path / "planes" / "shanghai" / "exports").glob("*/*"))


def test_personal_data_under_an_approval_that_says_none_is_refused(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    _register_dataset(server, planes, patients(tmp_path / "patients"))
    member, bob, _, _ = _people(server)
    body = _approval_body(personal=False, route="exempt", route_ref="2024-Provisions Art.5(1)")
    approval = bob.approve(member.request_approval(body).id)
    export = member.start_export(ExportIn(dataset="patients", to="singapore", approval=approval.id))
    _until(server, planes, lambda: member.export(export.id).state != "preparing")
    refused = member.export(export.id)
    assert refused.state == "refused"
    assert refused.error is not None and "found 5 individuals" in refused.error


def test_a_prefetch_out_of_shanghai_is_refused_recorded_and_fails_its_job(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    _register_dataset(server, planes, patients(tmp_path / "patients"))
    member, *_, auditor = _people(server)
    job = member.submit(
        JobSubmit(
            team="llm",
            gpus=8,
            duration_s=60.0,
            gpu_types=["H100"],  # Singapore's and Tokyo's only
            dataset="patients",
            command=["true"],
        )
    )
    _until(server, planes, lambda: member.job(job.id).state in ("failed", "completed"))
    failed = member.job(job.id)
    assert failed.state == "failed"
    assert failed.reason is not None and "controls exports" in failed.reason, failed.reason
    [entry] = [e for e in _entries(auditor) if e["type"] == "refused"]
    assert (entry["via"], entry["job"], entry["source"]) == ("prefetch", job.id, "shanghai")
    assert member.transfers(state="all") == []


def test_a_register_replaced_by_an_empty_one_refuses_every_export(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    """The database names entries the register no longer holds: it was moved, emptied or
    rolled back, and the server says so instead of starting over with a new key."""
    _register_dataset(server, planes, patients(tmp_path / "patients"))
    member, bob, _, _ = _people(server)
    approval = bob.approve(member.request_approval(_approval_body()).id)
    export = member.start_export(ExportIn(dataset="patients", to="singapore", approval=approval.id))
    _until(server, planes, lambda: member.export(export.id).state == "done")
    server.stop()
    store = Store.open(server.config.database_url)
    with store.engine.begin() as conn:  # the register's rows emptied, the exports' kept
        conn.execute(sql("DELETE FROM register_entries"))
        conn.execute(sql("DELETE FROM register_checkpoints"))
        conn.execute(sql("UPDATE register_head SET size = 0, checkpoints = 0"))
    store.close()
    server.start()
    member, bob, _, auditor = _people(server)
    with pytest.raises(UnavailableError, match="replaced or rolled back"):
        member.start_export(ExportIn(dataset="patients", to="singapore", approval=approval.id))
    with pytest.raises(UnavailableError):
        auditor.register_head()


def test_proofs_at_an_earlier_size_verify_against_that_size_s_root(
    server: RunningServer, planes: dict[str, SiteData], tmp_path: Path
) -> None:
    _register_dataset(server, planes, patients(tmp_path / "patients"))
    member, *_, auditor = _people(server)
    for _ in range(3):
        with pytest.raises(ForbiddenError):
            member.push(PushIn.model_validate({"dataset": "patients", "to": "singapore"}))
    leaves = [t.encode() for t in auditor.register_entries().entries]
    inclusion = auditor.register_proof(seq=1, size=2)
    assert inclusion.root == merkle.root(leaves[:2]).hex()
    merkle.verify_inclusion(
        1,
        2,
        merkle.leaf_hash(leaves[1]),
        [bytes.fromhex(p) for p in inclusion.proof],
        bytes.fromhex(inclusion.root),
    )
    head = auditor.register_head()
    consistency = auditor.register_proof(size1=2)
    merkle.verify_consistency(
        2,
        head.size,
        [bytes.fromhex(p) for p in consistency.proof],
        bytes.fromhex(inclusion.root),
        bytes.fromhex(head.root),
    )
