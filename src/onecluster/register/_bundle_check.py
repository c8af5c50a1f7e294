"""Verify a monthly bundle (``_bundle.py`` writes it) from the register's public key.

In order: the signed header (``bundle.json``); the signed head it names (``head.json``);
the previous month's head and the consistency proof to the head (``previous.json``); then
every entry: its inclusion proof against the head, its ``seq`` (consecutive from the
header's first), its ``at`` (in the month); then the count and SHA-256 of ``entries.jsonl``
the header signs, so a bundle cut short or padded is refused.  The JSON files must be
spelled exactly as the bundle writes them, so no byte of them can change unnoticed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from onecluster.errors import IntegrityError
from onecluster.export import merkle
from onecluster.register._bundle import BUNDLE_FORMAT, header_message, month_bounds, pretty_json
from onecluster.register._canonical import canonical, parse_entry
from onecluster.register._exports import export_rows, rows_csv
from onecluster.register._files import split_lines
from onecluster.register._head import SignedHead
from onecluster.register._html import render_html
from onecluster.register._keys import check_signature, fingerprint
from onecluster.register._report import VerifyReport

__all__ = ["verify_bundle"]

_HINT = "the bundle was altered after it was written: ask the register's operator for it again"


def _fail(message: str) -> IntegrityError:
    return IntegrityError(message, hint=_HINT)


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise _fail(f"the bundle has no {path.name}") from exc


def _json(path: Path) -> Any:
    data = _read(path)
    try:
        value = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _fail(f"{path.name} is not JSON") from exc
    if pretty_json(value) != data:
        raise _fail(f"{path.name} was edited: it is not spelled as the bundle writes it")
    return value


def _hashes(values: object, what: str) -> list[bytes]:
    if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
        raise _fail(f"{what} is not a list of hex digests")
    try:
        return [bytes.fromhex(v) for v in values]
    except ValueError as exc:
        raise _fail(f"{what} is not a list of hex digests") from exc


def _header(path: Path, key: bytes) -> dict[str, Any]:
    header = _json(path / "bundle.json")
    if not isinstance(header, dict) or header.get("format") != BUNDLE_FORMAT:
        raise _fail(f"bundle.json is not a bundle header of format {BUNDLE_FORMAT}")
    try:
        signature = bytes.fromhex(str(header.get("signature")))
    except ValueError as exc:
        raise _fail("bundle.json has no well-formed signature") from exc
    check_signature(key, signature, header_message(header), "bundle.json, the signed header")
    return header


def _head(path: Path, header: dict[str, Any], key: bytes) -> SignedHead:
    head = SignedHead.from_dict(_json(path / "head.json"), "head.json")
    head.verify(key)
    signed = header.get("head") or {}
    if (head.size, head.root.hex(), head.timestamp, head.origin) != (
        signed.get("size"),
        signed.get("root"),
        signed.get("timestamp"),
        header.get("origin"),
    ):
        raise _fail("head.json is not the signed tree head that bundle.json names")
    return head


def _previous(path: Path, header: dict[str, Any], head: SignedHead, key: bytes, start: str) -> int:
    """Check ``previous.json``; the size of the previous month's head (0 if none)."""
    named = header.get("previous")
    exists = (path / "previous.json").exists()
    if named is None:
        if exists:
            raise _fail("previous.json is there but bundle.json names no previous head")
        return 0
    if not exists:
        raise _fail("bundle.json names the previous month's head but previous.json is missing")
    document = _json(path / "previous.json")
    if not isinstance(document, dict):
        raise _fail("previous.json is not an object")
    previous = SignedHead.from_dict(document.get("head"), "previous.json's head")
    previous.verify(key)
    if {"size": previous.size, "root": previous.root.hex()} != named:
        raise _fail("previous.json is not the previous head that bundle.json names")
    if previous.timestamp >= start:
        raise _fail(f"the previous head is dated {previous.timestamp}, not before the month")
    proof = _hashes(document.get("consistency"), "previous.json's consistency proof")
    if previous.size == 0:
        if proof:
            raise _fail("a consistency proof from the empty tree must be empty")
    else:
        try:
            merkle.verify_consistency(previous.size, head.size, proof, previous.root, head.root)
        except IntegrityError as exc:
            msg = (
                f"the head of size {head.size} does not extend the previous month's head of "
                f"size {previous.size}: {exc.message}"
            )
            raise _fail(msg) from exc
    return previous.size


def verify_bundle(path: Path, key: bytes) -> VerifyReport:
    """Check the bundle in ``path`` under ``key``; see the module docstring."""
    header = _header(path, key)
    month = str(header.get("month"))
    start, end = month_bounds(month)
    head = _head(path, header, key)
    previous_size = _previous(path, header, head, key, start)
    count, first = header.get("count"), header.get("first_seq")
    if not isinstance(count, int) or (count and not isinstance(first, int)):
        raise _fail("bundle.json has no well-formed count and first seq")
    first = first if isinstance(first, int) else 0
    data = _read(path / "entries.jsonl")
    entries = split_lines(data)
    proofs = split_lines(_read(path / "proofs.jsonl"))
    for line_no, line in enumerate(entries.lines, start=1):
        seq = first + line_no - 1
        name = f"entry {seq} (line {line_no} of entries.jsonl)"
        if line_no > count:
            raise _fail(f"{name} is not one of the {count} entries the signed header lists")
        _check_entry(
            name, seq, line, proofs=proofs.lines, line_no=line_no, head=head, month=(start, end)
        )
        if seq < previous_size:
            raise _fail(f"{name} is inside the previous month's head of size {previous_size}")
    if entries.torn:
        raise _fail(f"entries.jsonl ends in a partial line (line {len(entries.lines) + 1})")
    if len(entries.lines) < count:
        seq = first + len(entries.lines)
        msg = (
            f"entry {seq} (line {len(entries.lines) + 1} of entries.jsonl) is missing: the signed "
            f"header lists {count} entries, entries.jsonl holds {len(entries.lines)}"
        )
        raise _fail(msg)
    if len(proofs.lines) != count or proofs.torn:
        raise _fail(f"proofs.jsonl holds {len(proofs.lines)} proofs for {count} entries")
    if hashlib.sha256(data).hexdigest() != header.get("entries_sha256"):
        raise _fail("entries.jsonl is not the file whose SHA-256 the signed header gives")
    last = header.get("last_seq")
    if count and last != first + count - 1:
        raise _fail(f"bundle.json's last seq {last} is not {first} + {count} − 1")
    _check_views(path, header, entries.lines, key)
    return VerifyReport(
        kind="bundle",
        size=head.size,
        root=head.root.hex(),
        entries_checked=count,
        key_fingerprint=fingerprint(key),
        heads_checked=2 if header.get("previous") else 1,
        month=month,
        first=first if count else None,
        last=first + count - 1 if count else None,
    )


def _check_entry(
    name: str,
    seq: int,
    line: bytes,
    *,
    proofs: list[bytes],
    line_no: int,
    head: SignedHead,
    month: tuple[str, str],
) -> None:
    """One entry of the bundle: proven in the head, its seq, canonical, in the month."""
    if line_no > len(proofs):
        raise _fail(f"{name} has no inclusion proof in proofs.jsonl")
    record = parse_entry(proofs[line_no - 1])
    if record is None or record.get("seq") != seq:
        raise _fail(f"{name}: line {line_no} of proofs.jsonl is not the proof of entry {seq}")
    proof = _hashes(record.get("proof"), f"the inclusion proof of {name}")
    if canonical(record) != proofs[line_no - 1]:
        raise _fail(f"{name}: line {line_no} of proofs.jsonl was edited")
    try:
        merkle.verify_inclusion(seq, head.size, merkle.leaf_hash(line), proof, head.root)
    except IntegrityError as exc:
        msg = (
            f"{name}: its hash is not the one the signed tree head of size {head.size} covers "
            f"at {seq} ({exc.message})"
        )
        raise _fail(msg) from exc
    entry = parse_entry(line)
    if entry is None or canonical(entry) != line or entry.get("seq") != seq:
        raise _fail(f"{name} is not the canonical JSON entry {seq}, though proven")
    at = entry.get("at")
    if not isinstance(at, str) or not month[0] <= at < month[1]:
        raise _fail(f"{name} is dated {at!r}, outside the bundle's month")


#: The files a bundle holds; anything else in its directory is refused.
_FILES = frozenset(
    {
        "bundle.json",
        "entries.jsonl",
        "proofs.jsonl",
        "head.json",
        "previous.json",
        "public.key",
        "exports.json",
        "exports.csv",
        "register.html",
    }
)


def _check_views(path: Path, header: dict[str, Any], lines: list[bytes], key: bytes) -> None:
    """The people's views (CSV, JSON, HTML) are exactly what the verified entries make:
    regulators read them, so an edited view must not pass as verified."""
    extra = sorted(p.name for p in path.iterdir() if p.name not in _FILES)
    if extra:
        raise _fail(f"the bundle holds files it never had: {', '.join(extra)}")
    entries = [e for e in (parse_entry(line) for line in lines) if e is not None]
    rows = export_rows(entries)
    expected = {
        "exports.json": pretty_json({"month": header["month"], "exports": rows}),
        "exports.csv": rows_csv(rows).encode("utf-8"),
        "register.html": render_html(header, rows, fingerprint(key)).encode("utf-8"),
    }
    for name, made in expected.items():
        if _read(path / name) != made:
            raise _fail(f"{name} is not what the verified entries make: it was edited")
