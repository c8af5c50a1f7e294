"""What a profile says about one field, and the value transformations that need no key.

Every transformation takes the field's text and answers the text to write, or ``None``
for "no value" (an empty CSV cell, JSON ``null``, a Parquet null).  A value that cannot
be generalised as declared (a birth date that is no date) becomes ``None`` rather than
being written as it was: a profile says a field must not leave as it is, so it never does.
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass

from onecluster.export._detect import ALL_KINDS, Kind
from onecluster.export._normalise import normalise

__all__ = ["Action", "FieldRule", "Generalisation", "OnDetect", "generalise", "mask"]


class Action(enum.StrEnum):
    """What happens to a field."""

    PSEUDONYM = "pseudonym"  # the whole value becomes a keyed token
    MASK = "mask"  # keep a few leading/trailing characters, star the rest
    DROP = "drop"  # the field is not written at all
    GENERALISE = "generalise"  # a coarser value: a year, a band, a network, a prefix
    KEEP = "keep"  # written as it is, no detector runs
    SCAN = "scan"  # the detectors run; what they find is replaced (the default)


class Generalisation(enum.StrEnum):
    """How a field is generalised."""

    YEAR = "year"  # a date → "1987"
    YEAR_MONTH = "year_month"  # a date → "1987-06"
    BAND = "band"  # a number (an age) → "30-39" (width 10), or "90+" from ``top``
    IP_PREFIX = "ip_prefix"  # an IP address → its /24 (IPv4) or /48 (IPv6) network
    PREFIX = "prefix"  # a code (a postcode) → its first ``keep`` characters


class OnDetect(enum.StrEnum):
    """What replaces what a detector finds."""

    PSEUDONYM = "pseudonym"  # a keyed token, e.g. MOBILE_7QK3…
    REDACT = "redact"  # the detector's name in brackets, e.g. [cn_mobile]


@dataclass(frozen=True, slots=True)
class FieldRule:
    """One field's rule; ``FieldRule()`` scans with every detector."""

    action: Action = Action.SCAN
    #: ``text`` or a detector's kind: how a value is canonicalised before its pseudonym
    #: is computed (so a number written two ways gets one token) and its HMAC domain.
    kind: str = "text"
    prefix: str | None = None
    #: Its values identify an individual: counted in the report's individuals.
    subject: bool = False
    #: Its values are sensitive personal information (PIPL Art. 28).
    sensitive: bool = False
    keep_first: int = 0
    keep_last: int = 0
    mask_char: str = "*"
    to: Generalisation | None = None
    width: int = 10
    top: int | None = None
    keep: int = 3
    detectors: frozenset[Kind] = ALL_KINDS

    def check(self) -> None:
        """Raise ``ValueError`` for a rule that contradicts itself."""
        if self.action is Action.GENERALISE and self.to is None:
            msg = "a generalised field needs 'to'"
            raise ValueError(msg)
        if self.action is Action.GENERALISE and self.to is Generalisation.BAND and self.width < 1:
            msg = "'width' must be at least 1"
            raise ValueError(msg)
        if self.action is Action.GENERALISE and self.to is Generalisation.PREFIX and self.keep < 1:
            msg = "'keep' must be at least 1"
            raise ValueError(msg)
        if len(self.mask_char) != 1:
            msg = f"'char' must be one character, not {self.mask_char!r}"
            raise ValueError(msg)
        if self.prefix is not None and not re.fullmatch(r"[A-Za-z][A-Za-z0-9]{0,15}", self.prefix):
            msg = f"'prefix' must be 1–16 ASCII letters or digits, a letter first ({self.prefix!r})"
            raise ValueError(msg)
        if self.action is Action.DROP and self.sensitive:
            msg = "a dropped field never leaves, so it cannot be 'sensitive'"
            raise ValueError(msg)


def mask(rule: FieldRule, value: str) -> str:
    """``value`` with all but ``keep_first`` leading and ``keep_last`` trailing characters
    replaced by the mask character; a value no longer than what is kept is masked whole."""
    n = len(value)
    first, last = rule.keep_first, rule.keep_last
    if n <= first + last:
        return rule.mask_char * n
    return value[:first] + rule.mask_char * (n - first - last) + value[n - last :]


_DATE = re.compile(r"\s*([12][0-9]{3})(?:\s*[-/.年]?\s*([0-9]{1,2}))?")


def generalise(rule: FieldRule, value: str) -> str | None:
    """The generalised ``value``, or ``None`` when it is not what ``rule.to`` expects."""
    text = normalise(value).text.strip()
    match rule.to:
        case Generalisation.YEAR | Generalisation.YEAR_MONTH:
            return _date(text, with_month=rule.to is Generalisation.YEAR_MONTH)
        case Generalisation.BAND:
            return _band(text, rule.width, rule.top)
        case Generalisation.IP_PREFIX:
            return _network(text)
        case Generalisation.PREFIX:
            return text[: rule.keep] if len(text) > rule.keep else None
    return None


def _date(text: str, *, with_month: bool) -> str | None:
    found = _DATE.match(text)
    if not found:
        return None
    year, month = found.group(1), found.group(2)
    if not with_month:
        return year
    if month is None or not 1 <= int(month) <= 12:
        return None
    return f"{year}-{int(month):02d}"


def _band(text: str, width: int, top: int | None) -> str | None:
    try:
        number = float(text)
    except ValueError:
        return None
    if not 0 <= number < 1000:
        return None
    if top is not None and number >= top:
        return f"{top}+"
    low = int(number // width) * width
    return f"{low}-{low + width - 1}" if width > 1 else str(low)


def _network(text: str) -> str | None:
    try:
        address = ipaddress.ip_address(text.split("%", maxsplit=1)[0])
    except ValueError:
        return None
    bits = 24 if address.version == 4 else 48
    return str(ipaddress.ip_network(f"{address}/{bits}", strict=False))
