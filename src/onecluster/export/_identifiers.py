"""What makes a run of digits an identifier: the check characters and plausibility rules.

Each function takes the digits alone, ASCII, with the separators already removed, and
answers with the identifier's canonical form (what its pseudonym is computed over, so the
same person's number written two ways gets one token) or ``None``.

* **Mainland resident ID** (GB 11643-1999): 17 digits and a check character.  The first
  two digits are a province-level code (11–15, 21–23, 31–37, 41–46, 50–54, 61–65, and 71,
  81, 82, 83 used by Taiwan, Hong Kong and Macau residents' permits), digits 7–14 a birth
  date (a real calendar date, year 1900–2100), and the check character is
  ``"10X98765432"[Σ dᵢ·Wᵢ mod 11]`` with ``W = 7 9 10 5 8 4 2 1 6 3 7 9 10 5 8 4 2`` (ISO
  7064 MOD 11-2).  Canonical: the 18 characters, ``X`` upper-case.
* **Mainland mobile**: ``1[3-9]`` and 9 more digits, optionally behind ``86`` or ``0086``
  (``+86`` arrives as ``86``).  Canonical: the 11 digits.
* **Bank card**: 13–19 digits passing Luhn, with an issuer prefix a card can have (3, 4,
  5, 6; Mastercard's 2221–2720 at 16 digits; UnionPay's 81; the legacy domestic 94 and 95
  at 16 digits or more).  A Luhn-valid run with another prefix — order numbers, epoch
  timestamps, which start with 1 or 2 — is not a card.  Canonical: the digits.
"""

from __future__ import annotations

import calendar

__all__ = ["luhn_ok", "mobile", "plausible_card", "resident_id"]

_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_CHECK = "10X98765432"
_PROVINCES = frozenset(
    {"11", "12", "13", "14", "15", "21", "22", "23", "31", "32", "33", "34", "35", "36"}
    | {"37", "41", "42", "43", "44", "45", "46", "50", "51", "52", "53", "54", "61", "62"}
    | {"63", "64", "65", "71", "81", "82", "83"}
)
_DOUBLED = (0, 2, 4, 6, 8, 1, 3, 5, 7, 9)
_MOBILE_SECOND = frozenset("3456789")


def resident_id(chars: str) -> str | None:
    """The canonical resident ID if ``chars`` is one, else ``None``."""
    if len(chars) != 18 or not chars[:17].isdigit() or not chars.isascii():
        return None
    if chars[:2] not in _PROVINCES:
        return None
    year, month, day = int(chars[6:10]), int(chars[10:12]), int(chars[12:14])
    if not (1900 <= year <= 2100 and 1 <= month <= 12):
        return None
    if not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    total = sum(int(c) * w for c, w in zip(chars, _WEIGHTS, strict=False))
    check = chars[17].upper()
    return chars[:17] + check if _CHECK[total % 11] == check else None


def mobile(digits: str) -> str | None:
    """The 11-digit mainland mobile number in ``digits`` (maybe behind 86 or 0086)."""
    n = len(digits)
    if n == 13 and digits.startswith("86"):
        digits = digits[2:]
    elif n == 15 and digits.startswith("0086"):
        digits = digits[4:]
    elif n != 11:
        return None
    if digits[0] == "1" and digits[1] in _MOBILE_SECOND and digits.isdigit():
        return digits
    return None


def luhn_ok(digits: str) -> bool:
    """Whether ``digits`` (ASCII) pass the Luhn check."""
    total = 0
    for position, char in enumerate(reversed(digits)):
        value = ord(char) - 48
        total += _DOUBLED[value] if position & 1 else value
    return total % 10 == 0


def plausible_card(digits: str) -> str | None:
    """``digits`` if they are a bank card number (length, issuer prefix, Luhn), else None."""
    n = len(digits)
    if not 14 <= n <= 19 or not digits.isdigit():
        return None
    first = digits[0]
    if n == 14:
        plausible = digits.startswith("36")  # Diners Club
    elif n == 15:
        plausible = digits.startswith(("34", "37"))  # American Express
    elif first in "3456" or digits.startswith("81"):
        plausible = True
    elif first == "2":
        plausible = n == 16 and 2221 <= int(digits[:4]) <= 2720
    elif digits.startswith(("94", "95")):
        plausible = n >= 16
    else:
        plausible = False
    return digits if plausible and luhn_ok(digits) else None
