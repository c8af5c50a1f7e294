"""Parquet streamed through a transformer, one row group (in batches) at a time, with pyarrow.

The output is a fresh file written with the output schema, never a copy of the input's
footer: the input's key-value metadata (pandas' included), column statistics, dictionaries
and bloom filters would otherwise carry raw values out.  Columns keep their order; dropped
ones are left out; pseudonymised, masked and generalised ones become strings (a date
generalised to its year is the string ``"1987"``); kept and scanned ones keep their type.

What is scanned: string columns (a vectorised pre-filter picks the values that hold a
digit, ``@`` or ``:``; only those go through the detectors), integer columns (values of 11
digits or more, the shortest identifier), and strings and integers nested in lists,
structs and maps.  An identifier found in an integer cannot be replaced by a token in a
column of integers: the run is refused, naming the column, so that the profile declares
it (pseudonym, mask or drop) and the column becomes a string.  Floats are read as
integers; binary columns cannot be read and are refused unless the profile declares them;
booleans and dates are not scanned.

Refused (:class:`MalformedInputError`): a file whose footer does not decode (not Parquet,
truncated), and a row group that does not decode, named with its byte range and, where one
can be read alone, the first column that fails.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from onecluster.export._errors import MalformedInputError, ProfileError
from onecluster.export._normalise import odd_ranges
from onecluster.export._rules import Action, FieldRule
from onecluster.export._sink import HashingSink
from onecluster.export._transform import Operation, Transformer

__all__ = ["transform_parquet"]

_BATCH_ROWS = 65_536


# A vectorised pre-filter in RE2, a superset of what the detectors match: a character
# that normalising changes, 11 digits with separators, an at sign, a dotted quad, two
# colons with hex digits between.  Only the values it picks go through the detectors.
@functools.cache
def _suspect() -> str:
    odd = "".join(f"\\x{{{a:x}}}-\\x{{{b:x}}}" for a, b in odd_ranges())
    return (
        r"[0-9](?:[ \t-]{0,3}[0-9]){10}|@|[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}\.[0-9]{1,3}"
        rf"|:[0-9A-Fa-f]*:|[{odd}]"
    )


_SHORTEST = 10_000_000_000  # 11 digits: a mobile number


@dataclass(frozen=True, slots=True)
class _Column:
    name: str
    rule: FieldRule
    operate: Operation | None
    source: pa.DataType  # as read (dictionaries decoded)
    target: pa.DataType | None  # as written; None: dropped


def transform_parquet(
    path: Path, sink: HashingSink, transformer: Transformer, *, name: str
) -> None:
    """Stream the Parquet file at ``path`` to ``sink`` through ``transformer``; ``name``
    names it in errors.  Raises :class:`MalformedInputError` for what does not decode,
    :class:`ProfileError` for a profile naming a column the schema lacks (before anything
    is written) and for an identifier found in an integer column."""
    try:
        parquet = pq.ParquetFile(path)
        schema = parquet.schema_arrow
    except (pa.ArrowException, OSError) as exc:
        msg = f"{name} is not a readable Parquet file: its footer does not decode ({exc})"
        raise MalformedInputError(msg, where="footer") from None
    transformer.profile.check_columns(schema.names, source=f"the schema of {name}")
    columns = [_plan(transformer, f) for f in schema]
    target = pa.schema([pa.field(c.name, c.target) for c in columns if c.target is not None])
    with pq.ParquetWriter(sink, target) as writer:
        for group in range(parquet.num_row_groups):
            batches = parquet.iter_batches(batch_size=_BATCH_ROWS, row_groups=[group])
            while True:
                try:
                    batch = next(batches)
                except StopIteration:
                    break
                except (pa.ArrowException, OSError) as exc:
                    raise _undecodable(parquet, group, name, exc) from None
                arrays = []
                for column, array in zip(columns, batch.columns, strict=True):
                    out = _apply(transformer, column, _decoded(array), name)
                    if column.target is not None:
                        arrays.append(out)
                writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=target))
                transformer.flush(batch.num_rows)


def _decoded(array: pa.Array) -> pa.Array:
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _plan(transformer: Transformer, field: pa.Field) -> _Column:
    rule = transformer.profile.rule(field.name)
    source = field.type.value_type if pa.types.is_dictionary(field.type) else field.type
    if rule.action is Action.DROP:
        target = None
    elif rule.action in (Action.PSEUDONYM, Action.MASK, Action.GENERALISE):
        target = pa.string()
    else:
        target = source
    return _Column(field.name, rule, transformer.operation(field.name, rule), source, target)


def _apply(transformer: Transformer, column: _Column, array: pa.Array, name: str) -> pa.Array:
    operate, rule = column.operate, column.rule
    if rule.sensitive:
        valid = pc.and_(pc.is_valid(array), pc.not_equal(pc.cast(array, pa.string()), ""))
        transformer.mark_sensitive(pc.indices_nonzero(valid.fill_null(False)).to_pylist())
    if operate is None:
        return array
    if rule.action is Action.SCAN:
        return _scan(transformer, column, operate, array, name)
    values = array.to_pylist()
    out: list[str | None] = []
    for row, value in enumerate(values):
        if value is None:
            out.append(None)
            continue
        transformer.row = row
        text = value if isinstance(value, str) else _text(value)
        out.append(operate(text))
    return (
        array if column.target is None or rule.action is Action.KEEP else pa.array(out, pa.string())
    )


def _text(value: Any) -> str:
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return str(value)


def _scan(
    transformer: Transformer, column: _Column, operate: Operation, array: pa.Array, name: str
) -> pa.Array:
    kind = column.source
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        hit = pc.match_substring_regex(array, _suspect()).fill_null(False)
    elif pa.types.is_integer(kind) or pa.types.is_floating(kind):
        hit = pc.greater_equal(array, pa.scalar(_SHORTEST)).fill_null(False)
    elif (
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
    ):
        if not pc.any(pc.is_valid(array)).as_py():
            return array
        msg = f"{name}: column {column.name!r} holds binary values, which the detectors cannot read"
        hint = f"declare {column.name!r} in the profile: drop it, or keep it if not personal"
        raise ProfileError(msg, hint=hint)
    elif pa.types.is_nested(kind):
        hit = pc.is_valid(array)
    else:
        return array
    rows = pc.indices_nonzero(hit).to_pylist()
    if not rows:
        return array
    found = pc.filter(array, hit).to_pylist()
    replaced: list[Any] = []
    changed = False
    for row, value in zip(rows, found, strict=True):
        transformer.row = row
        new = _walk(operate, value, column.name, name, row)
        changed |= new is not value
        replaced.append(new)
    if not changed:
        return array
    if not pa.types.is_nested(kind):
        return pc.replace_with_mask(array, hit, pa.array(replaced, type=kind))
    values = array.to_pylist()
    for row, new in zip(rows, replaced, strict=True):
        values[row] = new
    return pa.array(values, type=kind)


def _walk(operate: Operation, value: Any, column: str, name: str, row: int) -> Any:
    """``value`` with its strings scanned; an identifier in an integer is refused."""
    if isinstance(value, str):
        return operate(value)
    if isinstance(value, float) and value.is_integer():
        value_text = str(int(value))
        if operate(value_text) != value_text:
            msg = (
                f"{name}: column {column!r} holds an identifier stored as a number (row "
                f"{row} of its batch), which no token can replace in a numeric column"
            )
            raise ProfileError(msg, hint=f"declare {column!r} in the profile")
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        if operate(str(value)) != str(value):
            msg = (
                f"{name}: column {column!r} holds an identifier stored as an integer (row "
                f"{row} of its batch), which no token can replace in an integer column"
            )
            hint = (
                f"declare {column!r} in the profile: pseudonym, mask or drop, "
                "or keep if its numbers are not personal"
            )
            raise ProfileError(msg, hint=hint)
        return value
    if isinstance(value, list | tuple):  # a map's entries are (key, value) tuples
        items = [_walk(operate, item, column, name, row) for item in value]
        if all(a is b for a, b in zip(items, value, strict=True)):
            return value
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        members = {k: _walk(operate, v, column, name, row) for k, v in value.items()}
        return members if any(members[k] is not value[k] for k in value) else value
    return value


def _undecodable(
    parquet: pq.ParquetFile, group: int, name: str, exc: BaseException
) -> MalformedInputError:
    meta = parquet.metadata.row_group(group)
    chunks = [meta.column(i) for i in range(meta.num_columns)]
    start = min((c.dictionary_page_offset or c.data_page_offset) for c in chunks)
    end = max(
        (c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size for c in chunks
    )
    culprit = ""
    for column in parquet.schema_arrow.names:
        try:
            parquet.read_row_group(group, columns=[column])
        except (pa.ArrowException, OSError):
            culprit = f", column {column!r}"
            break
    msg = f"{name}: row group {group} (bytes {start}–{end}{culprit}) does not decode ({exc})"
    return MalformedInputError(msg, where=f"row group {group}")
