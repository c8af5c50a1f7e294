"""Canonical JSON: the exact bytes of a register entry, and the check that an entry is JSON.

An entry's bytes are its leaf data in the Merkle tree, so they must be one function of its
value: keys sorted, no spaces (``separators=(",", ":")``), UTF-8 without ``\\u`` escapes
(``ensure_ascii=False``).  Only JSON values are accepted — objects with string keys,
lists, strings, finite numbers, booleans and ``null`` — so that parsing the bytes back gives
the value that was appended, and nothing is silently converted (a tuple to a list, an
integer key to a string, NaN to a token no JSON parser reads).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from onecluster.errors import ValidationError

__all__ = ["RESERVED", "canonical", "check_entry", "parse_entry"]

#: The keys the register adds to every entry; an appended entry must not carry them.
RESERVED = ("seq", "at")

#: Nesting deeper than this is refused (``json`` would recurse until the stack ran out).
_MAX_DEPTH = 64


def canonical(value: Mapping[str, Any]) -> bytes:
    """The canonical UTF-8 bytes of a JSON object already checked by :func:`check_entry`."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def check_entry(entry: object) -> dict[str, Any]:
    """A shallow copy of ``entry`` after checking that it is a JSON object of JSON values
    without the reserved keys; :class:`ValidationError` naming the first offending path."""
    if not isinstance(entry, Mapping):
        msg = f"a register entry must be a JSON object (a mapping), not {type(entry).__name__}"
        raise ValidationError(msg)
    for key in RESERVED:
        if key in entry:
            msg = f"a register entry must not carry {key!r}: the register assigns it"
            raise ValidationError(msg)
    _check_value(entry, "entry", 0)
    return dict(entry)


def _check_value(value: object, path: str, depth: int) -> None:
    if depth > _MAX_DEPTH:
        msg = f"{path} nests deeper than {_MAX_DEPTH} levels"
        raise ValidationError(msg)
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            msg = f"{path} is {value}, which JSON cannot hold"
            raise ValidationError(msg)
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                msg = f"{path} has a key {key!r} that is not a string"
                raise ValidationError(msg)
            _check_value(item, f"{path}[{key!r}]", depth + 1)
        return
    if isinstance(value, list):
        for position, item in enumerate(value):
            _check_value(item, f"{path}[{position}]", depth + 1)
        return
    msg = f"{path} is a {type(value).__name__}, not a JSON value (use a list, dict, str, number)"
    raise ValidationError(msg)


def parse_entry(line: bytes) -> dict[str, Any] | None:
    """The JSON object on one stored line (without its newline), or ``None`` when the line
    is not one: not UTF-8, not JSON, not an object."""
    try:
        value = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return None
    return value if isinstance(value, dict) else None
