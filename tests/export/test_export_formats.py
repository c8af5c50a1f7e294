"""The three formats end to end: what changes and what is kept byte for byte, the report,
the output's hash, and the refusals that leave no output at all."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from onecluster.errors import NotFoundError, ValidationError
from onecluster.export import (
    DeidReport,
    MalformedInputError,
    ProfileError,
    deidentify,
    parse_profile,
)

KEY = b"0123456789abcdef0123456789abcdef"
ID = "11010519491231002X"
MOBILE = "13812345678"
CARD = "6222021234567890128"


def run(path: Path, *, profile: dict[str, object] | None = None, out: str = "") -> DeidReport:
    target = path.with_name(out or f"out{path.suffix}")
    parsed = parse_profile(profile) if profile is not None else None
    return deidentify(path, target, key=KEY, profile=parsed)


def _write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def _leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if p.name.startswith((".out", "out")))


# -- CSV ----------------------------------------------------------------------------------


def test_csv_rows_nothing_changed_are_written_back_byte_for_byte(tmp_path: Path) -> None:
    data = (
        'id,note,price\r\n1,"quoted, with comma",12.50\r\n'
        f'2,手机{MOBILE}谢谢,"3"\r\n3,"two\r\nlines",7\r\n4,plain,8'
    ).encode()
    path = _write(tmp_path, "a.csv", data)
    report = run(path)
    out = (tmp_path / "out.csv").read_bytes()
    lines = out.split(b"\r\n")
    assert lines[0] == b"id,note,price"
    assert lines[1] == b'1,"quoted, with comma",12.50'  # unchanged: its own quoting kept
    assert lines[2].startswith("2,手机MOBILE_".encode()) and lines[2].endswith("谢谢,3".encode())
    assert lines[3:] == [b'3,"two', b'lines",7', b"4,plain,8"]  # no newline added at the end
    assert report.records == 4
    assert report.sha256 == hashlib.sha256(out).hexdigest()
    assert report.bytes_out == len(out) and report.bytes_in == len(data)
    assert report.detectors["cn_mobile"].found == 1
    assert report.fields["note"].changed == 1 and report.fields["price"].changed == 0


def test_csv_profile_actions(tmp_path: Path) -> None:
    data = (
        "\ufeffname,id_no,phone,birth,age,ip,zip,secret,comment,ok\n"
        f"张三,{ID},{MOBILE},1987-06-15,37,10.1.2.3,200031,s3cr3t,卡号{CARD},{MOBILE}\n"
        f"李四,bad-id,,unknown,,,,x,nothing,fine\n"
    ).encode()
    path = _write(tmp_path, "a.csv", data)
    report = run(
        path,
        profile={
            "version": 1,
            "fields": {
                "name": "pseudonym",
                "id_no": {"action": "pseudonym", "kind": "cn_resident_id", "subject": True},
                "phone": {"action": "mask", "keep_first": 3, "keep_last": 4},
                "birth": {"action": "generalise", "to": "year"},
                "age": {"action": "generalise", "to": "band"},
                "ip": {"action": "generalise", "to": "ip_prefix"},
                "zip": {"action": "generalise", "to": "prefix", "keep": 3},
                "secret": "drop",
                "ok": "keep",
            },
        },
    )
    text = (tmp_path / "out.csv").read_text(encoding="utf-8")
    header, first, second, _ = text.split("\n")
    assert header == "\ufeffname,id_no,phone,birth,age,ip,zip,comment,ok"  # BOM kept
    cells = first.split(",")
    assert cells[0].startswith("PSN_") and cells[1].startswith("ID_")
    assert cells[2:7] == ["138****5678", "1987", "30-39", "10.1.2.0/24", "200"]
    assert cells[7].startswith("卡号CARD_")
    assert cells[8] == MOBILE  # keep: no detector runs on it
    assert second.split(",")[3] == ""  # "unknown" is no date: written as no value
    assert report.fields["birth"].unparseable == 1
    assert report.fields["secret"].action == "drop"
    assert report.individuals == 2  # two id_no values, one of them malformed
    assert report.individuals_sensitive == 1  # the bank card sits in the first row


def test_the_same_value_gets_the_same_token_in_a_column_and_in_free_text(tmp_path: Path) -> None:
    data = f"phone,comment\n{MOBILE},call +86 138-1234-5678\n".encode()
    path = _write(tmp_path, "a.csv", data)
    run(
        path,
        profile={"version": 1, "fields": {"phone": {"action": "pseudonym", "kind": "cn_mobile"}}},
    )
    _, row, _ = (tmp_path / "out.csv").read_text().split("\n")
    phone, comment = row.split(",")
    assert comment == f"call {phone}"


@pytest.mark.parametrize(
    ("data", "where", "what"),
    [
        (b"a,b\n1,2\n3\n", "line 3", "the record has 1 fields and the header 2"),
        (b"a,b\n1,2\n3,4,5\n", "line 3", "has 3 fields"),
        (b'a,b\n1,"x"y\n', "line 2", "malformed CSV"),
        (b'a,b\n1,2\n3,"never closed\n4,5\n', "line 4", "malformed CSV"),
        (b"a,b\n1,2\n3,\xff\xfe\n", "line 3", "not UTF-8"),
    ],
)
def test_malformed_csv_stops_naming_the_line_and_leaves_no_output(
    tmp_path: Path, data: bytes, where: str, what: str
) -> None:
    path = _write(tmp_path, "a.csv", data)
    with pytest.raises(MalformedInputError) as caught:
        run(path)
    assert caught.value.where == where
    assert where in caught.value.message and what in caught.value.message
    assert _leftovers(tmp_path) == []


def test_a_refused_run_leaves_an_existing_output_as_it_was(tmp_path: Path) -> None:
    (tmp_path / "out.csv").write_text("previous\n")
    path = _write(tmp_path, "a.csv", b"a,b\n1\n")
    with pytest.raises(MalformedInputError):
        run(path)
    assert (tmp_path / "out.csv").read_text() == "previous\n"
    assert _leftovers(tmp_path) == ["out.csv"]


def test_a_profile_naming_a_missing_column_is_refused_before_anything_is_written(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, "a.csv", b"id,phone\n1,2\n")
    with pytest.raises(ProfileError) as caught:
        run(path, profile={"version": 1, "fields": {"mobile": "drop"}})
    assert "'mobile'" in caught.value.message and "'id', 'phone'" in caught.value.message
    assert _leftovers(tmp_path) == []


def test_empty_and_header_only_files(tmp_path: Path) -> None:
    assert run(_write(tmp_path, "a.csv", b"")).records == 0
    assert (tmp_path / "out.csv").read_bytes() == b""
    assert run(_write(tmp_path, "b.csv", b"a,b\n")).records == 0
    assert (tmp_path / "out.csv").read_bytes() == b"a,b\n"


def test_blank_lines_pass_and_tsv_is_tab_separated(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.tsv", f"a\tb\n\n{MOBILE}\tx, y\n".encode())
    report = run(path)
    lines = (tmp_path / "out.tsv").read_text().split("\n")
    assert lines[1] == "" and lines[2].startswith("MOBILE_") and lines[2].endswith("\tx, y")
    assert report.records == 1


# -- JSON Lines ----------------------------------------------------------------------------


def test_jsonl_nested_values_integers_and_keys_are_scanned(tmp_path: Path) -> None:
    lines = [
        {"id": 1, "text": "nothing here", "score": 0.5},
        {"id": 2, "user": {"phone": int(MOBILE), "tags": [f"卡{CARD}", None, True]}},
        {"id": 3, "by_phone": {MOBILE: "x"}, "f": 1.5},
        [f"a list record {ID}"],
    ]
    raw = "\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\r\n"
    raw = raw.replace('"score": 0.5', '"score":   0.5')  # odd spacing survives when unchanged
    path = _write(tmp_path, "a.jsonl", raw.encode())
    report = run(path)
    out = (tmp_path / "out.jsonl").read_bytes().split(b"\n")
    assert out[0] == raw.encode().split(b"\n")[0]
    second = json.loads(out[1])
    assert second["user"]["phone"].startswith("MOBILE_")  # the integer became its token
    assert second["user"]["tags"][0].startswith("卡CARD_") and second["user"]["tags"][1:] == [
        None,
        True,
    ]
    third = json.loads(out[2])
    assert next(iter(third["by_phone"])).startswith("MOBILE_") and third["f"] == 1.5
    assert json.loads(out[3])[0].startswith("a list record ID_")
    assert out[3].endswith(b"\r")  # the last line's CRLF kept
    assert report.records == 4 and report.individuals == 1


def test_jsonl_profile_applies_to_top_level_fields(tmp_path: Path) -> None:
    raw = json.dumps({"phone": MOBILE, "drop_me": "x", "nested": {"phone": MOBILE}}) + "\n"
    raw += json.dumps({"phone": None}) + "\n"
    path = _write(tmp_path, "a.jsonl", raw.encode())
    run(
        path,
        profile={
            "version": 1,
            "fields": {"phone": {"action": "mask", "keep_last": 4}, "drop_me": "drop"},
        },
    )
    first, second = (json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines())
    assert first["phone"] == "*******5678" and "drop_me" not in first
    assert first["nested"]["phone"].startswith("MOBILE_")
    assert second == {"phone": None}


@pytest.mark.parametrize(
    ("data", "where", "what"),
    [
        (b'{"a": 1}\n{"a": \n', "line 2", "not JSON"),
        (b'{"a": 1}\n\n{"a": 1, "a": "13812345678"}\n', "line 3", "the key 'a' is given twice"),
        (b'{"a": "\xff"}\n', "line 1", "not UTF-8"),
    ],
)
def test_malformed_jsonl_stops_naming_the_line(
    tmp_path: Path, data: bytes, where: str, what: str
) -> None:
    path = _write(tmp_path, "a.jsonl", data)
    with pytest.raises(MalformedInputError) as caught:
        run(path)
    assert caught.value.where == where and what in caught.value.message
    assert _leftovers(tmp_path) == []


def test_jsonl_profile_field_no_record_has_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.jsonl", b'{"a": 1}\n{"b": 2}\n')
    run(path, profile={"version": 1, "fields": {"a": "keep", "b": "keep"}})
    with pytest.raises(ProfileError, match=r"'c', which every record of a\.jsonl lacks"):
        run(path, profile={"version": 1, "fields": {"c": "keep"}}, out="other.jsonl")
    assert not (tmp_path / "other.jsonl").exists()


# -- Parquet ---------------------------------------------------------------------------------


def _parquet(tmp_path: Path, table: pa.Table, name: str = "a.parquet", **kw: object) -> Path:
    path = tmp_path / name
    pq.write_table(table, path, **kw)  # type: ignore[arg-type]
    return path


def test_parquet_columns_types_and_metadata(tmp_path: Path) -> None:
    table = pa.table(
        {
            "id": pa.array([1, 2, 3], pa.int64()),
            "text": ["hello", f"手机{MOBILE}", None],
            "phone": [MOBILE, "13912345678", None],
            "birth": pa.array([None, 0, 10000], pa.date32()),
            "secret": ["a", "b", "c"],
            "cat": pa.array(["x", f"{ID}", "x"]).dictionary_encode(),
            "tags": [["邮箱a@b.com"], [], None],
            "price": [1.5, 2.5, 3.5],
        }
    ).replace_schema_metadata({b"pandas": b'{"raw": "13812345678"}'})
    path = _parquet(tmp_path, table, row_group_size=2)
    report = run(
        path,
        profile={
            "version": 1,
            "fields": {
                "phone": {"action": "pseudonym", "kind": "cn_mobile"},
                "birth": {"action": "generalise", "to": "year"},
                "secret": "drop",
            },
        },
    )
    out = pq.read_table(tmp_path / "out.parquet")
    assert out.schema.names == ["id", "text", "phone", "birth", "cat", "tags", "price"]
    assert out.schema.metadata is None  # pandas' metadata (and its raw values) not carried
    assert out.schema.field("id").type == pa.int64()
    assert out.schema.field("phone").type == pa.string()
    assert out.schema.field("birth").type == pa.string()
    rows = out.to_pylist()
    assert rows[0]["text"] == "hello" and rows[1]["text"].startswith("手机MOBILE_")
    assert rows[2]["text"] is None and rows[2]["phone"] is None
    assert [r["birth"] for r in rows] == [None, "1970", "1997"]
    assert rows[1]["cat"].startswith("ID_") and rows[0]["cat"] == "x"
    assert rows[0]["tags"][0].startswith("邮箱EMAIL_") and rows[1]["tags"] == []
    assert [r["price"] for r in rows] == [1.5, 2.5, 3.5]
    assert report.records == 3
    assert report.sha256 == hashlib.sha256((tmp_path / "out.parquet").read_bytes()).hexdigest()


def test_parquet_identifier_in_an_integer_column_is_refused(tmp_path: Path) -> None:
    path = _parquet(tmp_path, pa.table({"n": pa.array([5, int(MOBILE)], pa.int64())}))
    with pytest.raises(ProfileError) as caught:
        run(path)
    assert "column 'n' holds an identifier stored as an integer" in caught.value.message
    assert caught.value.hint and "declare 'n'" in caught.value.hint
    assert _leftovers(tmp_path) == []
    run(path, profile={"version": 1, "fields": {"n": "keep"}})  # declared: fine


def test_parquet_missing_column_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    path = _parquet(tmp_path, pa.table({"a": [1]}))
    with pytest.raises(ProfileError, match=r"'b', which the schema of a\.parquet lacks"):
        run(path, profile={"version": 1, "fields": {"b": "drop"}})
    assert _leftovers(tmp_path) == []


def test_a_file_that_is_not_parquet_is_refused(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.parquet", b"PAR1 this is not really parquet")
    with pytest.raises(MalformedInputError) as caught:
        run(path)
    assert caught.value.where == "footer" and "footer does not decode" in caught.value.message
    assert _leftovers(tmp_path) == []


def test_a_corrupt_row_group_is_named_with_its_bytes(tmp_path: Path) -> None:
    texts = [f"row {i} " + "x" * 200 for i in range(3000)]
    table = pa.table({"a": list(range(3000)), "text": texts})
    path = _parquet(tmp_path, table, row_group_size=1000, compression="snappy")
    meta = pq.ParquetFile(path).metadata.row_group(1).column(1)
    start = meta.dictionary_page_offset or meta.data_page_offset
    data = bytearray(path.read_bytes())
    for i in range(start + 40, start + meta.total_compressed_size - 8):
        data[i] ^= 0x5A  # garble row group 1's text column, keep the footer
    path.write_bytes(bytes(data))
    with pytest.raises(MalformedInputError) as caught:
        run(path)
    assert caught.value.where == "row group 1"
    assert "column 'text'" in caught.value.message and "bytes " in caught.value.message
    assert _leftovers(tmp_path) == []


# -- what is refused whatever the format -----------------------------------------------------


def test_inputs_and_outputs_that_make_no_sense(tmp_path: Path) -> None:
    path = _write(tmp_path, "a.csv", b"a\n1\n")
    with pytest.raises(ValidationError, match=r"no format is known for the ending '\.xlsx'"):
        deidentify(tmp_path / "a.xlsx", tmp_path / "b.xlsx", key=KEY)
    with pytest.raises(ValidationError, match="must be in the input's format"):
        deidentify(path, tmp_path / "b.jsonl", key=KEY)
    with pytest.raises(NotFoundError):
        deidentify(tmp_path / "missing.csv", tmp_path / "b.csv", key=KEY)
    with pytest.raises(ValidationError, match="is the input"):
        deidentify(path, path, key=KEY)
    with pytest.raises(ValidationError, match="too short"):
        deidentify(path, tmp_path / "b.csv", key=b"short")
    assert path.read_bytes() == b"a\n1\n"
