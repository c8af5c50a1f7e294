"""One row per export, built from a month's register entries: the people's view.

Entries are grouped by ``entry["export"]`` (an entry without one is a row of its own).  An
``intent`` says what is asked — dataset, version, content hash, bytes, route, people,
categories, individuals —; ``complete`` what was sent; ``failed`` and ``refused`` why not.
The status is the last outcome seen (complete, failed, refused) or *in progress* when only
the intent is in the month.  Missing keys are left empty: nothing here assumes more than
that an entry is a JSON object with ``seq`` and ``at``.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable
from typing import Any

__all__ = ["COLUMNS", "INTENT_FIELDS", "export_rows", "rows_csv", "text_of"]

#: The fields an intent carries, in the order the views show them.
INTENT_FIELDS = (
    "dataset",
    "version",
    "content_hash",
    "bytes",
    "files",
    "source",
    "destination",
    "relays",
    "requester",
    "approver",
    "approval",
    "purpose",
    "route",
    "route_ref",
    "categories",
    "personal",
    "sensitive",
    "profile",
    "individuals",
    "individuals_sensitive",
)

#: Every column of ``exports.csv`` and ``register.html``, in order.
COLUMNS = (
    "export",
    "status",
    *INTENT_FIELDS,
    "bytes_sent",
    "sent_content_hash",
    "reason",
    "requested_at",
    "completed_at",
    "seqs",
)

_OUTCOMES = {"complete": "complete", "failed": "failed", "refused": "refused"}


def export_rows(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row (a dict over :data:`COLUMNS`) per export, in the order of each export's
    first entry; values are the entries' JSON values, ``None`` where none was given."""
    rows: dict[str, dict[str, Any]] = {}
    for entry in entries:
        seq = entry.get("seq")
        key = entry.get("export")
        name = str(key) if key is not None else f"(entry {seq})"
        row = rows.get(name)
        if row is None:
            row = rows[name] = dict.fromkeys(COLUMNS)
            row["export"], row["status"], row["seqs"] = name, "in progress", []
        row["seqs"].append(seq)
        kind = entry.get("type")
        if kind == "intent" or kind not in _OUTCOMES:
            for field in INTENT_FIELDS:
                if field in entry and row[field] is None:
                    row[field] = entry[field]
            if kind == "intent" and row["requested_at"] is None:
                row["requested_at"] = entry.get("at")
            continue
        row["status"] = _OUTCOMES[kind]
        row["completed_at"] = entry.get("at")
        if "reason" in entry:
            row["reason"] = entry["reason"]
        if "bytes_sent" in entry:
            row["bytes_sent"] = entry["bytes_sent"]
        if kind == "complete" and "content_hash" in entry:
            row["sent_content_hash"] = entry["content_hash"]
        if kind == "refused" and row["requested_at"] is None:
            row["requested_at"] = entry.get("at")
    return list(rows.values())


def text_of(value: Any) -> str:
    """A cell's text: lists joined with ``; ``, objects as compact JSON, none as empty."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, list):
        return "; ".join(text_of(item) for item in value)
    if isinstance(value, dict):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def rows_csv(rows: list[dict[str, Any]]) -> str:
    """The rows as CSV text with a header line (RFC 4180 quoting)."""
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow([_csv_safe(text_of(row[column])) for column in COLUMNS])
    return buffer.getvalue()


def _csv_safe(text: str) -> str:
    """A cell a spreadsheet will not run as a formula (OWASP CSV injection)."""
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
