"""JSON Lines streamed through a transformer, one line (one record) at a time.

The profile's fields are a record's top-level keys.  Under a scanned key (every key the
profile does not name) every string and integer is scanned however deep it is nested, and
so is every object key; under a declared key the action applies to each string or integer
inside (floats, booleans and nulls are left as they are).  An integer in which an
identifier is found becomes the string with its token.

A record nothing changed is written back as the very bytes it was read as; a changed one as
compact JSON (``ensure_ascii`` off) with its line's ending.  Refused
(:class:`MalformedInputError`, naming the line): a line that is not JSON, bytes that are
not UTF-8, an object with a key given twice (only the last would be scanned, and the raw
line that carries both would be written back).  A blank line is written back and counts
as no record.  JSON Lines records need not share keys, so a profile field that no record
has is refused at the end of the pass, when the output has not been put in place yet.
"""

from __future__ import annotations

import json
from typing import Any, BinaryIO

from onecluster.export._csv import line_ending
from onecluster.export._errors import MalformedInputError
from onecluster.export._rules import Action, FieldRule
from onecluster.export._sink import HashingSink
from onecluster.export._transform import Operation, Transformer

__all__ = ["transform_jsonl"]

_OTHER = "(other)"  # the tally of top-level keys and of records that are not objects


class _DuplicateKey(ValueError):
    pass


def _pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return out


def _apply(operate: Operation, value: Any, *, keys: bool) -> tuple[Any, bool]:
    """``value`` with ``operate`` applied to every string and integer in it (and to object
    keys when ``keys``); whether anything changed."""
    if isinstance(value, str):
        out = operate(value)
        return out, out is not value
    if isinstance(value, int) and not isinstance(value, bool):
        text = str(value)
        out = operate(text)
        return (out, True) if out is not text else (value, False)
    if isinstance(value, list):
        changed = False
        items = []
        for item in value:
            new, did = _apply(operate, item, keys=keys)
            items.append(new)
            changed |= did
        return items, changed
    if isinstance(value, dict):
        changed = False
        members = {}
        for key, item in value.items():
            new_key = key
            if keys:
                out = operate(key)
                if out is not key:
                    new_key, changed = out or "", True
            members[new_key], did = _apply(operate, item, keys=keys)
            changed |= did
        return members, changed
    return value, False


def transform_jsonl(
    source: BinaryIO, sink: HashingSink, transformer: Transformer, *, name: str
) -> None:
    """Stream ``source`` to ``sink`` through ``transformer``; ``name`` names the input in
    errors.  Raises :class:`MalformedInputError` at the first bad line and
    :class:`ProfileError` at the end for a profile field no record had."""
    profile = transformer.profile
    operations: dict[str, tuple[FieldRule, Operation | None]] = {}
    whole = transformer.operation(_OTHER, FieldRule(detectors=profile.detectors))
    for number, line in enumerate(source, 1):
        if not line.strip():
            sink.write(line)
            continue
        try:
            record = json.loads(line.decode("utf-8"), object_pairs_hook=_pairs)
        except UnicodeDecodeError as exc:
            msg = f"{name}, line {number}: bytes that are not UTF-8 at byte {exc.start + 1}"
            raise MalformedInputError(msg, where=f"line {number}") from None
        except _DuplicateKey as exc:
            msg = f"{name}, line {number}: the key {exc.args[0]!r} is given twice"
            raise MalformedInputError(msg, where=f"line {number}") from None
        except ValueError as exc:  # json.JSONDecodeError
            msg = f"{name}, line {number}: not JSON ({exc})"
            raise MalformedInputError(msg, where=f"line {number}") from None
        if isinstance(record, dict):
            out: dict[str, Any] = {}
            changed = False
            for key, value in record.items():
                known = operations.get(key)
                if known is None:
                    rule = profile.rule(key)
                    known = operations[key] = (rule, transformer.operation(key, rule))
                rule, operate = known
                scanned = rule.action is Action.SCAN
                new_key = key
                if scanned and whole is not None:
                    key_out = whole(key)
                    if key_out is not key:
                        new_key, changed = key_out or "", True
                new = value
                if operate is not None:
                    new, did = _apply(operate, value, keys=scanned)
                    changed |= did
                if rule.action is Action.DROP:
                    changed = True
                    continue
                out[new_key] = new
            result: Any = out
        else:
            result, changed = _apply(whole, record, keys=True) if whole else (record, False)
        transformer.flush()
        if changed:
            text = json.dumps(result, ensure_ascii=False, separators=(",", ":"))
            sink.write(text.encode("utf-8", "surrogatepass") + line_ending(line))
        else:
            sink.write(line)
    other = transformer.tally.fields.get(_OTHER)
    if other is not None and not (other.changed or other.found or other.unparseable):
        del transformer.tally.fields[_OTHER]  # nothing to report
    profile.check_columns(operations, source=f"every record of {name}")
