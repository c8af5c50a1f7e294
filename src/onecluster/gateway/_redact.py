"""PII redaction for the prompts and answers a team's policy keeps in the audit.

Pure and regex-based: e-mail addresses, phone numbers (mainland mobiles and landlines,
international ``+`` numbers), PRC resident identity numbers (checked with their ISO 7064
MOD 11-2 digit), payment card numbers (checked with Luhn, 13 to 19 digits, so UnionPay's
19 are caught) and IPv4 addresses become ``[EMAIL]``, ``[PHONE]``, ``[ID]``, ``[CARD]``
and ``[IP]``.  A number that fails its checksum is left alone (an order is not a card).
"""

from __future__ import annotations

import re

__all__ = ["redact"]

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_RESIDENT_ID = re.compile(r"(?<!\d)\d{17}[\dXx](?!\d)")
_CARD = re.compile(r"(?<!\d)\d(?:[ -]?\d){12,18}(?!\d)")
_PHONE = re.compile(
    r"(?<![\d+])(?:\+\d{1,3}[ -]?\d{1,4}(?:[ -]?\d{2,4}){1,3}|1[3-9]\d{9}|0\d{2,3}-\d{7,8})(?!\d)"
)
_IPV4 = re.compile(
    r"(?<![\d.])(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)(?![\d.])"
)

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"


def _resident_id_valid(number: str) -> bool:
    total = sum(int(d) * w for d, w in zip(number[:17], _ID_WEIGHTS, strict=True))
    return _ID_CHECK[total % 11] == number[17].upper()


def _luhn_valid(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def _id(match: re.Match[str]) -> str:
    return "[ID]" if _resident_id_valid(match.group()) else match.group()


def _card(match: re.Match[str]) -> str:
    digits = re.sub(r"[ -]", "", match.group())
    return "[CARD]" if _luhn_valid(digits) else match.group()


def redact(text: str) -> str:
    """``text`` with the PII listed above replaced by its kind."""
    text = _EMAIL.sub("[EMAIL]", text)
    text = _RESIDENT_ID.sub(_id, text)
    text = _CARD.sub(_card, text)
    text = _PHONE.sub("[PHONE]", text)
    return _IPV4.sub("[IP]", text)
