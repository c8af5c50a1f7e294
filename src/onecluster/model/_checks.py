"""Small validation helpers shared by the domain types (raise :class:`ValidationError`).

The wire format (``onecluster.schema``) and the fabric file use the same rules through the
``*_problem`` functions, which say what is wrong instead of raising.
"""

from __future__ import annotations

import math
import re
import unicodedata

from onecluster.errors import ValidationError

__all__ = [
    "MAX_COST_PER_GPU_HOUR",
    "MAX_DATASET_BYTES",
    "MAX_GPUS",
    "MAX_LABEL",
    "MAX_NAME",
    "check_at_most",
    "check_label",
    "check_name",
    "check_non_negative",
    "check_positive",
    "label_problem",
    "name_problem",
]

_NAME = re.compile(r"[a-z0-9][a-z0-9_.-]{0,62}")

#: The most GPUs a pool, a quota, a capacity report or a job may count.  The largest clusters
#: built so far hold a few hundred thousand GPUs; 10⁶ leaves room and still catches a typo
#: such as 10²³.
MAX_GPUS = 1_000_000
#: The largest dataset a fabric or a job may declare: 100 PB.
MAX_DATASET_BYTES = 10**17
#: The highest price of one GPU-hour a pool may declare.
MAX_COST_PER_GPU_HOUR = 1_000_000.0
#: The longest name (team, site, dataset, circuit, GPU type), in characters.
MAX_NAME = 63
#: The longest free-text label (job names, GPU types, regions …), in characters.
MAX_LABEL = 128

# Unicode categories a label must not hold: controls (Cc), format characters (Cf: the bidi
# embeddings, overrides and isolates U+202A–U+202E and U+2066–U+2069, the marks U+200E/F and
# U+061C, zero-width characters, the BOM), surrogates (Cs) and line/paragraph separators.
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


def name_problem(kind: str, value: object) -> str | None:
    """Why ``value`` is not a valid ``kind`` name, or ``None`` when it is."""
    if isinstance(value, str) and _NAME.fullmatch(value):  # match() lets "llm\n" through
        return None
    shown = value if not isinstance(value, str) or len(value) <= 80 else value[:80] + "…"
    return (
        f"{kind} name {shown!r} is not valid: use 1-63 lower-case letters, digits, "
        "'-', '_' or '.', starting with a letter or digit"
    )


def check_name(kind: str, value: str) -> None:
    """Names are lower-case identifiers: they appear in URLs, labels and file names."""
    problem = name_problem(kind, value)
    if problem is not None:
        raise ValidationError(problem)


def label_problem(kind: str, value: object, max_length: int = MAX_LABEL) -> str | None:
    """Why ``value`` is not a valid free-text ``kind`` (a job name, a GPU type …), or ``None``.

    A label is 1 to ``max_length`` characters with no surrounding blanks and nothing that
    hides or reorders text on a terminal: no control, format (bidi override, zero-width) or
    line-separator character.
    """
    if not isinstance(value, str) or not value:
        return f"the {kind} must be a non-empty text"
    if len(value) > max_length:
        return f"the {kind} is {len(value)} characters long; at most {max_length} are allowed"
    if value != value.strip():
        return f"the {kind} {value!r} starts or ends with blanks"
    for ch in value:
        if unicodedata.category(ch) in _HIDDEN:
            return (
                f"the {kind} {value!r} holds the invisible or control character "
                f"U+{ord(ch):04X}; use printable characters only"
            )
    return None


def check_label(kind: str, value: str, max_length: int = MAX_LABEL) -> None:
    """Raise :class:`ValidationError` unless ``value`` is a valid label (see
    :func:`label_problem`)."""
    problem = label_problem(kind, value, max_length)
    if problem is not None:
        raise ValidationError(problem)


def check_positive(what: str, value: float) -> None:
    """``value`` must be > 0 (and finite)."""
    if not value > 0 or math.isinf(value):
        msg = f"{what} must be a finite number greater than 0 (got {value})"
        raise ValidationError(msg)


def check_non_negative(what: str, value: float) -> None:
    """``value`` must be >= 0 (and finite)."""
    if not value >= 0 or math.isinf(value):
        msg = f"{what} must be a finite number, not negative (got {value})"
        raise ValidationError(msg)


def check_at_most(what: str, value: float, limit: float) -> None:
    """``value`` must not exceed ``limit`` (a sanity bound that catches typos)."""
    if value > limit:
        msg = f"{what} is {value:g}, above the limit of {limit:g}"
        raise ValidationError(msg, hint="check the number for a typo (an extra digit or exponent)")
