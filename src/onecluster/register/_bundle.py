"""The monthly register for regulators: one directory an auditor checks alone.

``write_bundle(register, "2026-11", out)`` writes into ``out``:

- ``entries.jsonl`` — the entries whose ``at`` falls in the month (UTC), their exact bytes;
- ``proofs.jsonl`` — each entry's inclusion proof against the register's current head;
- ``head.json`` — that signed head; ``previous.json`` — the last head signed before the
  month began and the consistency proof from it to ``head.json`` (absent if there is none);
- ``public.key`` — the register's Ed25519 public key (auditors should pin their own copy);
- ``bundle.json`` — the signed header: month, first and last seq, count, the head's size
  and root, the previous head's, the SHA-256 of ``entries.jsonl``, so a bundle whose entries
  were cut short is refused;
- ``exports.csv``, ``exports.json``, ``register.html`` — one row per export, for people.

The directory is written beside ``out`` and renamed into place once complete.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from onecluster.errors import ConflictError, StorageError, ValidationError
from onecluster.register._canonical import canonical, parse_entry
from onecluster.register._exports import export_rows, rows_csv
from onecluster.register._files import fsync_directory, write_all
from onecluster.register._head import SignedHead, utc_iso
from onecluster.register._html import render_html
from onecluster.register._keys import fingerprint
from onecluster.register._log import Register

__all__ = [
    "BUNDLE_FORMAT",
    "BundleSummary",
    "header_message",
    "month_bounds",
    "pretty_json",
    "write_bundle",
]

#: The version of the bundle's layout, in ``bundle.json``.
BUNDLE_FORMAT = 1

#: Signed before the header's canonical JSON, so that no other signed message of the
#: register key (a checkpoint note) can pass for a bundle header or the reverse.
_HEADER_CONTEXT = b"onecluster export register bundle header v1\n"

_MONTH = re.compile(r"(\d{4})-(0[1-9]|1[0-2])")


@dataclass(frozen=True, slots=True)
class BundleSummary:
    """What :func:`write_bundle` wrote: ``count`` entries making ``exports`` export rows,
    checked against the signed head of ``head_size`` entries, in ``path``."""

    month: str
    count: int
    exports: int
    head_size: int
    path: Path


def month_bounds(month: str) -> tuple[str, str]:
    """The first instant of ``month`` ("YYYY-MM") and of the month after, as register
    timestamps; :class:`ValidationError` for a malformed month."""
    match = _MONTH.fullmatch(month) if isinstance(month, str) else None
    if match is None:
        msg = f"a month is written YYYY-MM (e.g. 2026-11), not {month!r}"
        raise ValidationError(msg)
    year, number = int(match[1]), int(match[2])
    start = datetime(year, number, 1, tzinfo=UTC)
    end = datetime(year + number // 12, number % 12 + 1, 1, tzinfo=UTC)
    return utc_iso(start.timestamp()), utc_iso(end.timestamp())


def header_message(header: dict[str, Any]) -> bytes:
    """The bytes the header's signature covers: a context line, then the header's canonical
    JSON without its ``signature``."""
    body = {k: v for k, v in header.items() if k != "signature"}
    return _HEADER_CONTEXT + canonical(body)


def pretty_json(value: Any) -> bytes:
    """How the bundle writes its JSON files (and the only spelling the verifier accepts)."""
    return (json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _first_at_or_after(register: Register, size: int, moment: str) -> int:
    """The first seq below ``size`` whose ``at`` is at or after ``moment`` (``size`` if
    none); entries' times never decrease, so a binary search finds it."""
    lo, hi = 0, size
    while lo < hi:
        mid = (lo + hi) // 2
        entry = parse_entry(register.entry_bytes(mid))
        if entry is not None and str(entry.get("at", "")) < moment:
            lo = mid + 1
        else:
            hi = mid
    return lo


def write_bundle(register: Register, month: str, out: Path) -> BundleSummary:
    """Write the bundle of ``month`` ("YYYY-MM", UTC) of ``register`` into ``out`` (see the
    module docstring).  ``out`` must not exist, or be an empty directory.

    Raises :class:`ValidationError` for a malformed month, :class:`ConflictError` when
    ``out`` holds files, :class:`StorageError` when it cannot be written.
    """
    start, end = month_bounds(month)
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        msg = f"{out} exists and is not an empty directory"
        raise ConflictError(msg, hint="give a new directory for the bundle")
    head = register.head()
    first = _first_at_or_after(register, head.size, start)
    last = _first_at_or_after(register, head.size, end)
    lines = [register.entry_bytes(seq) for seq in range(first, last)]
    previous = _previous_head(register, start, head)
    header: dict[str, Any] = {
        "format": BUNDLE_FORMAT,
        "origin": head.origin,
        "month": month,
        "first_seq": first if lines else None,
        "last_seq": last - 1 if lines else None,
        "count": len(lines),
        "head": {"size": head.size, "root": head.root.hex(), "timestamp": head.timestamp},
        "previous": None
        if previous is None
        else {"size": previous.size, "root": previous.root.hex()},
        "entries_sha256": hashlib.sha256(b"".join(line + b"\n" for line in lines)).hexdigest(),
        "generated_at": utc_iso(register._clock.now()),
    }
    header["signature"] = register._sign(header_message(header)).hex()
    files = _files(register, header=header, head=head, previous=previous, lines=lines, first=first)
    _write_directory(out, files)
    rows = json.loads(files["exports.json"])["exports"]
    return BundleSummary(month, len(lines), len(rows), head.size, out)


def _previous_head(register: Register, start: str, head: SignedHead) -> SignedHead | None:
    before = [h for h in register._signed_heads() if h.timestamp < start]
    return before[-1] if before and before[-1].size <= head.size else None


def _files(
    register: Register,
    *,
    header: dict[str, Any],
    head: SignedHead,
    previous: SignedHead | None,
    lines: list[bytes],
    first: int,
) -> dict[str, bytes]:
    """Every file of the bundle by name."""
    proofs = b"".join(
        canonical(
            {
                "seq": first + i,
                "proof": [p.hex() for p in register.inclusion_proof(first + i, head.size)],
            }
        )
        + b"\n"
        for i in range(len(lines))
    )
    public_pem = Ed25519PublicKey.from_public_bytes(register.public_key()).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    entries = [e for e in (parse_entry(line) for line in lines) if e is not None]
    rows = export_rows(entries)
    key_fp = fingerprint(register.public_key())
    files = {
        "bundle.json": pretty_json(header),
        "entries.jsonl": b"".join(line + b"\n" for line in lines),
        "proofs.jsonl": proofs,
        "head.json": pretty_json(head.to_dict()),
        "public.key": public_pem,
        "exports.json": pretty_json({"month": header["month"], "exports": rows}),
        "exports.csv": rows_csv(rows).encode("utf-8"),
        "register.html": render_html(header, rows, key_fp).encode("utf-8"),
    }
    if previous is not None:
        consistency = register.consistency_proof(previous.size, head.size)
        files["previous.json"] = pretty_json(
            {"head": previous.to_dict(), "consistency": [p.hex() for p in consistency]}
        )
    return files


def _write_directory(out: Path, files: dict[str, bytes]) -> None:
    """Write ``files`` into a new directory beside ``out``, fsync them, rename it to ``out``."""
    parent = out.resolve().parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=parent))
    except OSError as exc:
        msg = f"cannot write the bundle beside {out}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
    try:
        for name, data in files.items():
            fd = os.open(staging / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            try:
                write_all(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        staging.chmod(0o755)
        fsync_directory(staging)
        if out.exists():
            out.rmdir()  # empty, checked above
        staging.rename(out)
        fsync_directory(parent)
    except OSError as exc:
        shutil.rmtree(staging, ignore_errors=True)
        msg = f"cannot write the bundle {out}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
