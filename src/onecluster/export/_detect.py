"""The detectors: personal identifiers found in any text, with their spans in the original.

:func:`find` looks for the kinds of :class:`Kind`.  It is pure and built for the hot path:

1. a pre-filter: a text without any digit, ``@`` or ``:`` (in any width) holds none of
   them, and most fields stop here;
2. a text with a full-width, other-script or invisible character is normalised
   (:mod:`._normalise`) and the spans found map back to the original; an ASCII text is
   used as it is;
3. *digit runs* — at least 11 digits with up to three spaces, tabs or dashes between
   them, an optional leading ``+`` and trailing ``X`` — are found by one regex and
   classified (:mod:`._identifiers`): a resident ID beats a mobile number beats a bank
   card.  A run that is no identifier as a whole is tried group by group (the parts its
   separators make), longest first from the left, so that two numbers written side by side
   are both found;
4. e-mail addresses (spaces allowed around ``@``), IPv4 (each octet ≤ 255) and IPv6
   (validated by :mod:`ipaddress`) by their own regexes.

Each family runs only where it could match (11 digits, an ``@``, four digits and three
dots, two colons), counted at C speed first.  A match must not touch an ASCII letter or
digit (``\\b`` would not do: there is no word boundary between a Chinese character and a
digit), except a short *label* glued on its left (``ID``, ``IP``, ``Tel``: see
:func:`_labelled`), so hex digests, UUIDs and product codes are not taken apart; a
Chinese character next to a number is no obstacle.  Overlapping matches keep the one that
starts first, the longer one on a tie (``13812345678@qq.com`` is one e-mail address).
"""

from __future__ import annotations

import enum
import ipaddress
import re
from dataclasses import dataclass

from onecluster.export._identifiers import mobile, plausible_card, resident_id
from onecluster.export._normalise import Normalised, needs_normalising, normalise

__all__ = [
    "ALL_KINDS",
    "DETECTOR_VERSION",
    "TRIGGER",
    "Finding",
    "Kind",
    "canonical",
    "find",
    "find_triggered",
    "triggered",
]

#: Changes whenever what the detectors find changes; the register records it.
DETECTOR_VERSION = "1"


class Kind(enum.StrEnum):
    """A kind of identifier a detector finds (its name in profiles and reports)."""

    RESIDENT_ID = "cn_resident_id"
    MOBILE = "cn_mobile"
    BANK_CARD = "bank_card"
    EMAIL = "email"
    IPV4 = "ipv4"
    IPV6 = "ipv6"


ALL_KINDS = frozenset(Kind)
_DIGIT_KINDS = frozenset({Kind.RESIDENT_ID, Kind.MOBILE, Kind.BANK_CARD})


@dataclass(frozen=True, slots=True)
class Finding:
    """One identifier: its kind, its span ``[start, end)`` in the original text, and its
    canonical value (what the pseudonym is computed over)."""

    kind: Kind
    start: int
    end: int
    value: str


#: Step 1, the pre-filter: any digit (every script), an at sign or a colon (every width).
TRIGGER = re.compile(r"[\d@:\uff20\ufe6b\uff1a\ufe55]")

# At least 11 digits (the shortest identifier, a mobile number), so that the many short
# numbers of ordinary text (dates, prices, counts) never leave the regex engine.  The
# patterns start with a character class, never a look-behind, so that the engine skips
# ahead to a digit at C speed; what the look-behind would check is checked on each match.
_RUN = re.compile(r"[0-9](?:[ \t\-]{0,3}[0-9]){10,}(?:[ \t\-]{0,3}[Xx])?(?![0-9A-Za-z])")
_DIGIT = re.compile(r"[0-9]")
_GROUP = re.compile(r"\+?[0-9]+|[Xx]")
_MAX_RUN = 20  # the longest identifier written without separators: "+0086" and 11 digits
_EMAIL = re.compile(
    r"(?<![A-Za-z0-9._%+\-])[A-Za-z0-9._%+\-]+ {0,2}@ {0,2}"
    r"(?:[A-Za-z0-9](?:[A-Za-z0-9\-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z]{2,24}"
    r"(?![A-Za-z0-9\-])"
)
_IPV4 = re.compile(r"[0-9]{1,3}(?:\.[0-9]{1,3}){3}(?![0-9A-Za-z]|\.[0-9])")
_IPV6 = re.compile(
    r"(?<![0-9A-Fa-f.])(?<![0-9A-Fa-f]:)(?<!::)(?:[0-9A-Fa-f]{0,4}:){2,7}"
    r"(?:(?:[0-9]{1,3}\.){3}[0-9]{1,3}|[0-9A-Fa-f]{1,4})?"
    r"(?:%[0-9A-Za-z]{1,16})?(?![0-9A-Za-z:])"
)


_LABEL = 10  # the longest word of letters that may be glued before a number ("ID", "Tel")


_HEX_LETTERS = frozenset("abcdefABCDEF")


def _labelled(text: str, start: int) -> bool:
    """Whether a match at ``start`` stands clear on its left: nothing alphanumeric touches
    it, or only a label — a short word of letters, itself clear on its left, with a letter
    that is no hex digit (``ID110…``, ``IP1.2.3.4``, ``QQ…``, ``Tel…``).  So the inside of
    a hex digest or a UUID (``a1458122-4705-…``) is never taken for a number."""
    i = start - 1
    while i >= 0 and text[i].isascii() and text[i].isalpha():
        i -= 1
    label = text[i + 1 : start]
    if not label:
        return True
    if len(label) > _LABEL or set(label) <= _HEX_LETTERS:
        return False
    return not (i >= 0 and text[i].isascii() and text[i].isalnum())


def triggered(text: str) -> bool:
    """The pre-filter: could ``text`` hold any identifier at all?"""
    return TRIGGER.search(text) is not None


def _classify(chars: str) -> tuple[Kind, str] | None:
    """What a run's characters (digits, maybe a leading ``+`` and a trailing ``X``) are."""
    plus = chars.startswith("+")
    digits = chars[1:] if plus else chars
    if len(digits) == 18:
        found = resident_id(digits)
        if found:
            return Kind.RESIDENT_ID, found
    if not digits.isdigit():  # an X is only ever a resident ID's check character
        return None
    if plus and not digits.startswith("86"):
        return None  # another country's number
    found = mobile(digits)
    if found:
        return Kind.MOBILE, found
    found = plausible_card(digits)
    return (Kind.BANK_CARD, found) if found else None


def _runs(text: str, kinds: frozenset[Kind], out: list[Finding]) -> None:
    for run in _RUN.finditer(text):
        chars = run.group()
        base = run.start()
        if base:
            before = text[base - 1]
            if "0" <= before <= "9":
                continue
            if before == "+":
                base -= 1
                chars = "+" + chars
            if base and not _labelled(text, base):
                continue
        if len(chars) <= _MAX_RUN and chars.isalnum():  # one group, the common case
            hit = _classify(chars)
            if hit and hit[0] in kinds:
                out.append(Finding(hit[0], base, run.end(), hit[1]))
            continue
        groups = [(g.start(), g.end(), g.group()) for g in _GROUP.finditer(chars)]
        i = 0
        while i < len(groups):
            candidates: list[tuple[int, str]] = []
            joined = ""
            for j in range(i, len(groups)):
                part = groups[j][2]
                if j > i and part.startswith("+"):
                    break
                joined += part
                if len(joined) > _MAX_RUN:
                    break
                candidates.append((j, joined))
            for j, joined in reversed(candidates):
                hit = _classify(joined)
                if hit and hit[0] in kinds:
                    out.append(Finding(hit[0], base + groups[i][0], base + groups[j][1], hit[1]))
                    i = j + 1
                    break
            else:
                i += 1


def _emails(text: str, out: list[Finding]) -> None:
    for m in _EMAIL.finditer(text):
        out.append(Finding(Kind.EMAIL, m.start(), m.end(), m.group().replace(" ", "").lower()))


def _ipv4s(text: str, out: list[Finding]) -> None:
    for m in _IPV4.finditer(text):
        start = m.start()
        if start and (text[start - 1] in "0123456789." or not _labelled(text, start)):
            continue
        octets = m.group().split(".")
        if all(int(o) <= 255 for o in octets):
            value = ".".join(str(int(o)) for o in octets)
            out.append(Finding(Kind.IPV4, start, m.end(), value))


def _ipv6s(text: str, out: list[Finding]) -> None:
    for m in _IPV6.finditer(text):
        start, end = m.start(), m.end()
        address = m.group()
        # A lone colon at either end is punctuation ("联系方式：fe80::1", normalised).
        if address.startswith(":") and not address.startswith("::"):
            address, start = address[1:], start + 1
        if address.endswith(":") and not address.endswith("::"):
            address, end = address[:-1], end - 1
        if start and not _labelled(text, start):
            continue
        address = address.split("%", maxsplit=1)[0]
        if address.count(":") < 2 or not any(c not in ":0" for c in address):
            continue
        try:
            value = ipaddress.IPv6Address(address).compressed
        except ValueError:
            continue
        out.append(Finding(Kind.IPV6, start, end, value))


def _resolve(found: list[Finding]) -> list[Finding]:
    """Non-overlapping findings, left to right: the first to start wins, the longer on a tie."""
    found.sort(key=lambda f: (f.start, f.start - f.end))
    kept: list[Finding] = []
    for finding in found:
        if not kept or finding.start >= kept[-1].end:
            kept.append(finding)
    return kept


def find(text: str, kinds: frozenset[Kind] = ALL_KINDS) -> list[Finding]:
    """Every identifier of ``kinds`` in ``text``, in order, spans in ``text``'s offsets."""
    if len(text) < 3 or not kinds or not TRIGGER.search(text):
        return []
    return find_triggered(text, kinds)


def find_triggered(text: str, kinds: frozenset[Kind]) -> list[Finding]:
    """:func:`find` for a text that passed the pre-filter (:data:`TRIGGER`)."""
    copy = normalise(text) if needs_normalising(text) else None
    scanned = text if copy is None else copy.text
    found: list[Finding] = []
    # Each family runs only where it could match — 11 digits for the shortest digit
    # identifier, an at sign, four digits and three dots, two colons — counted at C speed,
    # since most text holds a few short numbers at most.
    digits = len(_DIGIT.findall(scanned)) if len(scanned) >= 7 else 0
    if digits >= 11 and not kinds.isdisjoint(_DIGIT_KINDS):
        _runs(scanned, kinds, found)
    if "@" in scanned and Kind.EMAIL in kinds:
        _emails(scanned, found)
    if digits >= 4 and scanned.count(".") >= 3 and Kind.IPV4 in kinds:
        _ipv4s(scanned, found)
    if scanned.count(":") >= 2 and Kind.IPV6 in kinds:
        _ipv6s(scanned, found)
    if len(found) > 1:
        found = _resolve(found)
    if copy is None or copy.same_offsets:
        return found
    return [_back(copy, f) for f in found]


def _back(copy: Normalised, finding: Finding) -> Finding:
    start, end = copy.original_span(finding.start, finding.end)
    return Finding(finding.kind, start, end, finding.value)


def canonical(kind: Kind, text: str) -> str | None:
    """The canonical value of ``text`` taken whole as an identifier of ``kind`` (a declared
    column), or ``None`` when it is not one: its normalised characters without separators
    for the digit kinds, lower case for e-mail, the compressed address for IPs."""
    flat = normalise(text).text.strip()
    if kind in _DIGIT_KINDS:
        chars = re.sub(r"[ \t\-()]", "", flat)
        hit = _classify(chars)
        return hit[1] if hit and hit[0] is kind else None
    if kind is Kind.EMAIL:
        compact = flat.replace(" ", "").lower()
        return compact if _EMAIL.fullmatch(compact) else None
    try:
        address = ipaddress.ip_address(flat.split("%")[0])
    except ValueError:
        return None
    expected = 4 if kind is Kind.IPV4 else 6
    return address.compressed if address.version == expected else None
