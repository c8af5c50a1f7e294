"""What an outside review found leaving unchanged: a CSV without a header row, and Parquet
identifiers stored as binary or as floats.  Each is refused now, and nothing is written."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from onecluster.export import MalformedInputError, ProfileError, deidentify

KEY = b"a key of more than sixteen bytes"


def test_a_csv_whose_first_line_holds_an_identifier_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "noheader.csv"
    source.write_text("13812345678,11010519491231002X,Zhang San\n13912345678,x,Li Si\n")
    with pytest.raises(MalformedInputError, match="no header row"):
        deidentify(source, tmp_path / "out.csv", key=KEY)
    assert not (tmp_path / "out.csv").exists()


@pytest.mark.parametrize(
    "column",
    [
        pa.array([b"13812345678 a@b.com"], pa.binary()),
        pa.array([b"13812345678"], pa.large_binary()),
        pa.array([b"13812345678"], pa.binary(11)),
    ],
)
def test_a_parquet_binary_column_is_refused_unless_declared(
    tmp_path: Path, column: pa.Array
) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"blob": column}), source)
    with pytest.raises(ProfileError, match="binary values"):
        deidentify(source, tmp_path / "out.parquet", key=KEY)
    assert not (tmp_path / "out.parquet").exists()


def test_an_identifier_stored_as_a_float_is_refused(tmp_path: Path) -> None:
    source = tmp_path / "in.parquet"
    pq.write_table(pa.table({"phone": pa.array([13812345678.0, 1.5])}), source)
    with pytest.raises(ProfileError, match="stored as a number"):
        deidentify(source, tmp_path / "out.parquet", key=KEY)
    small = tmp_path / "small.parquet"
    pq.write_table(pa.table({"amount": pa.array([1.5, 200.0])}), small)
    deidentify(small, tmp_path / "small-out.parquet", key=KEY)  # ordinary floats pass
