"""Small validation helpers shared by the domain types (raise :class:`ValidationError`)."""

from __future__ import annotations

import re

from onecluster.errors import ValidationError

_NAME = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,62}$")


def check_name(kind: str, value: str) -> None:
    """Names are lower-case identifiers: they appear in URLs, labels and file names."""
    if not isinstance(value, str) or not _NAME.match(value):
        msg = (
            f"{kind} name {value!r} is not valid: use 1-63 lower-case letters, digits, "
            "'-', '_' or '.', starting with a letter or digit"
        )
        raise ValidationError(msg)


def check_positive(what: str, value: float) -> None:
    """``value`` must be > 0."""
    if not value > 0:
        msg = f"{what} must be greater than 0 (got {value})"
        raise ValidationError(msg)


def check_non_negative(what: str, value: float) -> None:
    """``value`` must be >= 0."""
    if not value >= 0:
        msg = f"{what} must not be negative (got {value})"
        raise ValidationError(msg)
