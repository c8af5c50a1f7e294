"""Calendar months in UTC: the period a monthly report covers."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from onecluster.errors import ValidationError

__all__ = ["Month"]

_MONTH = re.compile(r"^(\d{4})-(\d{2})$")


@dataclass(frozen=True, slots=True)
class Month:
    """One calendar month in UTC, ``[start, end)`` in epoch seconds."""

    year: int
    month: int

    def __post_init__(self) -> None:
        if not 1 <= self.month <= 12:
            msg = f"month {self.month} is not between 1 and 12"
            raise ValidationError(msg, hint="write the month as YYYY-MM, e.g. 2026-03")
        if not 1970 <= self.year <= 9998:
            msg = f"year {self.year} is outside 1970-9998"
            raise ValidationError(msg, hint="write the month as YYYY-MM, e.g. 2026-03")

    @classmethod
    def parse(cls, text: str) -> Month:
        """``'2026-03'`` → March 2026.  Anything but exactly ``YYYY-MM`` is a
        :class:`ValidationError` (no day, no time, no single-digit month)."""
        match = _MONTH.match(text) if isinstance(text, str) else None
        if match is None:
            msg = f"month {text!r} is not in the form YYYY-MM"
            raise ValidationError(msg, hint="write the month as YYYY-MM, e.g. 2026-03")
        return cls(int(match.group(1)), int(match.group(2)))

    @property
    def start(self) -> float:
        """Epoch seconds of the first instant of the month (UTC)."""
        return datetime(self.year, self.month, 1, tzinfo=UTC).timestamp()

    @property
    def end(self) -> float:
        """Epoch seconds of the first instant of the next month (UTC), exclusive."""
        year, month = (self.year + 1, 1) if self.month == 12 else (self.year, self.month + 1)
        return datetime(year, month, 1, tzinfo=UTC).timestamp()

    @property
    def hours(self) -> float:
        """Hours in the month (672, 696, 720 or 744)."""
        return (self.end - self.start) / 3600.0

    def __str__(self) -> str:
        return f"{self.year:04d}-{self.month:02d}"
