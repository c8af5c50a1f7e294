"""CSV (and TSV) streamed through a transformer, one record at a time, with the stdlib ``csv``.

The input is read as binary lines and decoded one line at a time, so bytes that are not
UTF-8 are named by their line; a record that spans lines (a quoted newline) is read whole.
A record nothing changed is written back as the very bytes it was read as (quoting,
spacing and line ends included); a changed one is written by ``csv.writer`` (minimal
quoting) with the line end its last line had.  The first line is the header: it names the
columns the profile's rules apply to (a UTF-8 byte order mark before it is kept).

Refused (:class:`MalformedInputError`, naming the line): a record with more or fewer
fields than the header, bad quoting (a quote inside an unquoted field, text after a
closing quote, a quote never closed), a field over 128 KiB, bytes that are not UTF-8.
A blank line is written back as it is and counts as no record.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator
from typing import BinaryIO

from onecluster.export._detect import find
from onecluster.export._errors import MalformedInputError
from onecluster.export._rules import Action
from onecluster.export._sink import HashingSink
from onecluster.export._transform import Transformer

__all__ = ["line_ending", "transform_csv"]

_BOM = "\ufeff"


class _Parts:
    """What ``csv.writer`` writes one row into."""

    __slots__ = ("parts", "write")

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.write = self.parts.append


def line_ending(line: bytes) -> bytes:
    """The end of ``line``: CRLF, LF, CR, or nothing (the last line of a file)."""
    if line.endswith(b"\r\n"):
        return b"\r\n"
    return line[-1:] if line.endswith((b"\n", b"\r")) else b""


def transform_csv(
    source: BinaryIO,
    sink: HashingSink,
    transformer: Transformer,
    *,
    name: str,
    delimiter: str = ",",
) -> None:
    """Stream ``source`` to ``sink`` through ``transformer``; ``name`` names the input in
    errors.  Raises :class:`MalformedInputError` at the first bad record (what was written
    to ``sink`` before it is the caller's to discard) and :class:`ProfileError` for a
    profile naming a column the header lacks, before anything is written."""
    raw: list[bytes] = []

    def lines() -> Iterator[str]:
        for line in source:
            raw.append(line)
            yield line.decode("utf-8")

    reader = csv.reader(lines(), delimiter=delimiter, strict=True)
    try:
        header = next(reader, None)
        if header is None:
            return
        bom = bool(header) and header[0].startswith(_BOM)
        names = [header[0].removeprefix(_BOM), *header[1:]] if bom else header
        for cell in names:  # a header is written out as it is: it must hold no identifier
            found = find(cell)
            if found:
                msg = (
                    f"{name}: line 1, read as the header, holds an identifier "
                    f"({found[0].kind}): the file seems to have no header row"
                )
                raise MalformedInputError(
                    msg, where="line 1", hint="add a header row naming the columns"
                )
        transformer.profile.check_columns(names, source=f"the header of {name}")
        rules = [transformer.profile.rule(column) for column in names]
        kept = [i for i, rule in enumerate(rules) if rule.action is not Action.DROP]
        dropping = len(kept) < len(names)
        operations = [
            (i, op)
            for i, column in enumerate(names)
            if (op := transformer.operation(column, rules[i])) is not None
        ]
        parts = _Parts()
        writer = csv.writer(parts, delimiter=delimiter, lineterminator="")
        if dropping:
            writer.writerow([names[i] for i in kept])
            text = (_BOM if bom else "") + "".join(parts.parts)
            sink.write(text.encode() + line_ending(raw[-1]))
            parts.parts.clear()
        else:
            sink.write(b"".join(raw))
        raw.clear()
        width = len(names)
        flush = transformer.flush
        for row in reader:
            if len(row) != width:
                if not row:  # a blank line
                    sink.write(b"".join(raw))
                    raw.clear()
                    continue
                msg = (
                    f"{name}, line {reader.line_num}: the record has {len(row)} fields "
                    f"and the header {width}"
                )
                raise MalformedInputError(msg, where=f"line {reader.line_num}")
            changed = dropping
            for i, operate in operations:
                value = row[i]
                out = operate(value)
                if out is not value:
                    row[i] = "" if out is None else out
                    changed = True
            flush()
            if changed:
                writer.writerow([row[i] for i in kept] if dropping else row)
                sink.write("".join(parts.parts).encode() + line_ending(raw[-1]))
                parts.parts.clear()
            else:
                sink.write(raw[0] if len(raw) == 1 else b"".join(raw))
            raw.clear()
    except csv.Error as exc:
        line = reader.line_num
        msg = f"{name}, line {line}: malformed CSV ({exc})"
        raise MalformedInputError(msg, where=f"line {line}") from None
    except UnicodeDecodeError as exc:
        line = reader.line_num + 1
        msg = f"{name}, line {line}: bytes that are not UTF-8 at byte {exc.start + 1} of the line"
        raise MalformedInputError(msg, where=f"line {line}", hint="convert it to UTF-8") from None
