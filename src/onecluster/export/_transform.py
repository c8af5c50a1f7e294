"""One profile applied to values, field by field: the core every format's reader shares.

A reader asks :meth:`Transformer.operation` once per column for a function from a value
to the value to write, calls it on every value of that column, and calls
:meth:`Transformer.flush` after every record (CSV, JSONL) or batch (Parquet).  An
operation returns its argument itself when nothing changed, so a reader can tell by
identity, and ``None`` for "no value".

Individuals: a record's *subjects* are the keyed digests of its values that identify a
person — a column the profile marks ``subject``, or an identifier a detector found whose
kind is in the profile's ``subjects`` (resident IDs by default).  The run's individuals are
its distinct subjects; its sensitive individuals are the subjects of records that hold
sensitive personal information: a column marked ``sensitive``, or a bank card number
(financial accounts are sensitive under PIPL Art. 28).  A reader working a column at a
time sets :attr:`Transformer.row` so that a record's values are put together again.
"""

from __future__ import annotations

from collections.abc import Callable

from onecluster.export._detect import TRIGGER, Finding, Kind, canonical, find_triggered
from onecluster.export._normalise import normalise
from onecluster.export._profile import Profile
from onecluster.export._pseudonym import Pseudonymiser
from onecluster.export._report import FieldTally, Tally
from onecluster.export._rules import Action, FieldRule, OnDetect, generalise, mask

__all__ = ["SENSITIVE_KINDS", "Operation", "Transformer"]

#: A value in, the value to write out (itself when unchanged; ``None``: no value).
Operation = Callable[[str], str | None]

#: Detected kinds that are sensitive personal information (PIPL Art. 28: financial accounts).
SENSITIVE_KINDS = frozenset({Kind.BANK_CARD})

_PREFIX = {
    Kind.RESIDENT_ID: "ID",
    Kind.MOBILE: "MOBILE",
    Kind.BANK_CARD: "CARD",
    Kind.EMAIL: "EMAIL",
    Kind.IPV4: "IP",
    Kind.IPV6: "IP",
}


class Transformer:
    """Applies ``profile`` with ``pseudonymiser``'s key; counts into :attr:`tally`."""

    def __init__(self, profile: Profile, pseudonymiser: Pseudonymiser) -> None:
        self.profile = profile
        self.tally = Tally()
        #: The record (within the current batch) whose values are being transformed.
        self.row = 0
        self._pseudonymiser = pseudonymiser
        self._pending: list[tuple[int, bytes]] = []
        self._sensitive_rows: set[int] = set()

    def flush(self, records: int = 1) -> None:
        """Close ``records`` records: their subjects join the run's individuals."""
        self.tally.records += records
        if self._pending:
            for row, digest in self._pending:
                self.tally.subjects.add(digest)
                if row in self._sensitive_rows:
                    self.tally.sensitive_subjects.add(digest)
            self._pending.clear()
        self._sensitive_rows.clear()

    def mark_sensitive(self, rows: list[int]) -> None:
        """Mark ``rows`` of the current batch as holding sensitive personal information
        (for a reader that does not pass every value of a sensitive column through its
        operation)."""
        self._sensitive_rows.update(rows)

    def operation(self, name: str, rule: FieldRule | None = None) -> Operation | None:
        """The operation on field ``name`` (its profile rule unless ``rule`` is given), or
        ``None`` when its values are written as they are and need no bookkeeping.  Dropped
        fields are the reader's to leave out; their bookkeeping still runs here."""
        rule = rule or self.profile.rule(name)
        tally = self.tally.field(name, rule.action.value)
        if rule.action is Action.SCAN:
            return self._scanner(rule, tally)
        if rule.action in (Action.KEEP, Action.DROP) and not (rule.subject or rule.sensitive):
            return None
        subject, sensitive, kind = rule.subject, rule.sensitive, rule.kind
        prefix = rule.prefix or ("PSN" if kind == "text" else _PREFIX[Kind(kind)])
        action = rule.action

        def operate(value: str) -> str | None:
            if not value:
                return value
            if subject or action is Action.PSEUDONYM:
                token, digest = self._pseudonymiser.token(
                    kind, self._canonical(kind, value), prefix
                )
                if subject:
                    self._pending.append((self.row, digest))
            if sensitive:
                self._sensitive_rows.add(self.row)
            if action is Action.PSEUDONYM:
                out: str | None = token
            elif action is Action.MASK:
                out = mask(rule, value)
            elif action is Action.GENERALISE:
                out = generalise(rule, value)
                if out is None:
                    tally.unparseable += 1
            else:  # keep, or drop (left out by the reader)
                return value
            if out != value:
                tally.changed += 1
                return out
            return value

        return operate

    @staticmethod
    def _canonical(kind: str, value: str) -> str:
        if kind != "text":
            found = canonical(Kind(kind), value)
            if found is not None:
                return found
        return normalise(value).text.strip()

    def _scanner(self, rule: FieldRule, tally: FieldTally) -> Operation | None:
        kinds = rule.detectors
        if not kinds and not rule.sensitive:
            return None
        sensitive = rule.sensitive
        replace = self._replacement
        search = TRIGGER.search

        def scan(value: str) -> str:
            if sensitive and value:
                self._sensitive_rows.add(self.row)
            if len(value) < 3 or search(value) is None:
                return value
            found = find_triggered(value, kinds)
            if not found:
                return value
            pieces: list[str] = []
            last = 0
            for finding in found:
                pieces.append(value[last : finding.start])
                pieces.append(replace(finding))
                last = finding.end
            pieces.append(value[last:])
            tally.found += len(found)
            tally.changed += 1
            return "".join(pieces)

        return scan

    def _replacement(self, finding: Finding) -> str:
        kind = finding.kind
        token, digest = self._pseudonymiser.token(kind.value, finding.value, _PREFIX[kind])
        self.tally.finding(kind.value, digest)
        if kind in self.profile.subjects:
            self._pending.append((self.row, digest))
        if kind in SENSITIVE_KINDS:
            self._sensitive_rows.add(self.row)
        return token if self.profile.on_detect is OnDetect.PSEUDONYM else f"[{kind.value}]"
