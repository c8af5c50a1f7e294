"""What a de-identification run found, changed and wrote: the tallies and the final report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeidReport", "FieldCount", "FieldTally", "KindCount", "Tally", "freeze_counts"]


@dataclass(frozen=True, slots=True)
class KindCount:
    """One detector's findings: occurrences, and distinct values (by keyed digest)."""

    found: int
    distinct: int


@dataclass(frozen=True, slots=True)
class FieldCount:
    """One field: its action, the values it changed, the identifiers the detectors found in
    it, and the values that could not be generalised (written as no value)."""

    action: str
    changed: int
    found: int
    unparseable: int


@dataclass(slots=True)
class FieldTally:
    """The mutable counters of one field (see :class:`FieldCount`)."""

    action: str
    changed: int = 0
    found: int = 0
    unparseable: int = 0


@dataclass(slots=True)
class Tally:
    """The mutable counters of a run in progress (owned by one transformer)."""

    records: int = 0
    found: dict[str, int] = field(default_factory=dict)
    distinct: dict[str, set[bytes]] = field(default_factory=dict)
    fields: dict[str, FieldTally] = field(default_factory=dict)
    subjects: set[bytes] = field(default_factory=set)
    sensitive_subjects: set[bytes] = field(default_factory=set)

    def field(self, name: str, action: str) -> FieldTally:
        """The tally of field ``name`` (created on first use)."""
        tally = self.fields.get(name)
        if tally is None:
            tally = self.fields[name] = FieldTally(action)
        return tally

    def finding(self, kind: str, digest: bytes) -> None:
        """Count one identifier of ``kind`` found (``digest`` tells distinct values apart)."""
        self.found[kind] = self.found.get(kind, 0) + 1
        self.distinct.setdefault(kind, set()).add(digest)


@dataclass(frozen=True, slots=True)
class DeidReport:
    """The outcome of one run: what the register records about the output.

    ``subjects`` holds the keyed digests (16 bytes each) of the individuals in the output —
    what a year's distinct-individual count is the union of — and is left out of
    :meth:`to_dict`, like ``sensitive_subjects``.
    """

    source: str
    output: str
    format: str
    records: int
    bytes_in: int
    bytes_out: int
    sha256: str
    key_id: str
    profile_name: str | None
    profile_sha256: str | None
    detector_version: str
    detectors: Mapping[str, KindCount]
    fields: Mapping[str, FieldCount]
    subjects: frozenset[bytes]
    sensitive_subjects: frozenset[bytes]

    @property
    def individuals(self) -> int:
        """Distinct individuals in the output."""
        return len(self.subjects)

    @property
    def individuals_sensitive(self) -> int:
        """Distinct individuals whose sensitive personal information is in the output."""
        return len(self.sensitive_subjects)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (what ``export deid --json`` prints)."""
        return {
            "source": self.source,
            "output": self.output,
            "format": self.format,
            "records": self.records,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "sha256": self.sha256,
            "key_id": self.key_id,
            "profile": {"name": self.profile_name, "sha256": self.profile_sha256}
            if self.profile_sha256 or self.profile_name
            else None,
            "detector_version": self.detector_version,
            "detectors": {
                kind: {"found": c.found, "distinct": c.distinct}
                for kind, c in sorted(self.detectors.items())
            },
            "fields": {
                name: {
                    "action": c.action,
                    "changed": c.changed,
                    "found": c.found,
                    "unparseable": c.unparseable,
                }
                for name, c in self.fields.items()
            },
            "individuals": self.individuals,
            "individuals_sensitive": self.individuals_sensitive,
        }


def freeze_counts(tally: Tally) -> tuple[dict[str, KindCount], dict[str, FieldCount]]:
    """The frozen per-detector and per-field counts of ``tally``."""
    kinds = {
        kind: KindCount(found=n, distinct=len(tally.distinct.get(kind, ())))
        for kind, n in tally.found.items()
    }
    fields = {
        name: FieldCount(t.action, t.changed, t.found, t.unparseable)
        for name, t in tally.fields.items()
    }
    return kinds, fields
