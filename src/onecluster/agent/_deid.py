"""An export's de-identification at its source: every file of a version held here through
a profile, under this site's key, into a directory of its own that is then scanned as the
version that leaves (``docs/export.md``).

Only CSV, JSON Lines and Parquet leave: any other file refuses the whole export (images,
audio and other binaries are denied by default).  The key never leaves this site; the
report that goes to the server carries counts and the key's id only.
"""

from __future__ import annotations

import shutil
import threading
from pathlib import Path
from typing import Any

from onecluster.errors import PlatformError, ValidationError
from onecluster.export import FORMATS, DeidReport, deidentify, format_of, profile_from_bytes
from onecluster.schema import ScanOrder
from onecluster.storage import DataStore
from onecluster.transfer import EntryKind

__all__ = ["deidentify_version"]


def deidentify_version(
    order: ScanOrder, store: DataStore, key: bytes | None, out: Path, stop: threading.Event
) -> dict[str, Any]:
    """Write the de-identified copy of the order's source version into ``out`` (made
    afresh); the report summed over its files.  Raises :class:`PlatformError` with the
    reason (the file and row or offset for malformed input) and leaves nothing in ``out``."""
    if key is None:
        msg = (
            "this site's agent has no de-identification key (--deid-key-file or "
            "$ONECLUSTER_DEID_KEY): a pseudonym made without a secret key can be reversed"
        )
        raise ValidationError(msg, hint="give the agent a key of at least 16 random bytes")
    assert order.source_dataset is not None and order.source_root is not None
    root = bytes.fromhex(order.source_root)
    replica = next(
        (
            r
            for r in store.replicas()
            if r.dataset == order.source_dataset and r.root == root and r.complete
        ),
        None,
    )
    manifest = store.manifest(root)
    if replica is None or manifest is None:
        msg = f"this site holds no complete replica of {order.source_dataset}@{root.hex()[:12]}"
        raise ValidationError(msg)
    profile = (
        profile_from_bytes(order.profile.encode(), source="the approval's profile")
        if order.profile is not None
        else None
    )
    files = [e for e in manifest.entries if e.kind is EntryKind.FILE]
    for entry in files:
        try:
            format_of(Path(entry.path))
        except ValidationError as exc:
            msg = (
                f"{entry.path}: only {', '.join(sorted(FORMATS))} files may be exported "
                "(other formats are denied by default)"
            )
            raise ValidationError(msg) from exc
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    total: dict[str, Any] = {"files": 0, "records": 0, "findings": {}}
    subjects: set[bytes] = set()
    sensitive: set[bytes] = set()
    try:
        for entry in files:
            if stop.is_set():
                msg = "the export was stopped"
                raise PlatformError(msg)
            source = replica.dir / entry.path
            if source.stat().st_size != entry.size:
                msg = f"{entry.path} changed since it was scanned: rescan the dataset first"
                raise ValidationError(msg)
            target = out / entry.path
            target.parent.mkdir(parents=True, exist_ok=True)
            report = deidentify(source, target, key=key, profile=profile)
            _add(total, report)
            subjects |= report.subjects
            sensitive |= report.sensitive_subjects
    except PlatformError as exc:
        shutil.rmtree(out, ignore_errors=True)
        where = f" ({entry.path})" if entry.path not in exc.message else ""
        raise PlatformError(exc.message + where, hint=exc.hint) from exc
    except OSError as exc:
        shutil.rmtree(out, ignore_errors=True)
        msg = f"cannot de-identify {entry.path}: {exc.strerror or exc}"
        raise PlatformError(msg) from exc
    total["individuals"] = len(subjects)  # distinct over every file of the version
    total["individuals_sensitive"] = len(sensitive)
    return total


def _add(total: dict[str, Any], report: DeidReport) -> None:
    total["files"] += 1
    total["records"] += report.records
    total["key_id"] = report.key_id
    total["detector_version"] = report.detector_version
    total["profile_sha256"] = report.profile_sha256
    findings: dict[str, int] = total["findings"]
    for kind, count in report.detectors.items():
        findings[kind] = findings.get(kind, 0) + count.found
