"""read_chunk: byte-offset log chunks that never split a UTF-8 character."""

from __future__ import annotations

from pathlib import Path

import pytest

from onecluster.backends._logs import read_chunk
from onecluster.errors import ValidationError


def test_chunks_follow_byte_offsets(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_bytes(b"hello world\n")
    assert read_chunk(log, 0, 5, final=False) == ("hello", 5)
    assert read_chunk(log, 5, 100, final=False) == (" world\n", 12)
    assert read_chunk(log, 12, 100, final=True) == ("", 12)


def test_an_incomplete_character_waits_for_the_next_read(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_bytes("abcé".encode())  # b"abc\xc3\xa9"
    assert read_chunk(log, 0, 4, final=False) == ("abc", 3)
    assert read_chunk(log, 3, 4, final=False) == ("é", 5)


def test_a_truncated_tail_is_replaced_only_when_final(tmp_path: Path) -> None:
    log = tmp_path / "out.log"
    log.write_bytes(b"ok\xc3")
    assert read_chunk(log, 0, 64, final=False) == ("ok", 2)
    assert read_chunk(log, 0, 64, final=True) == ("ok\ufffd", 3)


def test_missing_file_reads_empty_and_bad_arguments_are_refused(tmp_path: Path) -> None:
    assert read_chunk(tmp_path / "none.log", 0, 64, final=True) == ("", 0)
    with pytest.raises(ValidationError):
        read_chunk(tmp_path / "none.log", -1, 64, final=True)
    with pytest.raises(ValidationError):
        read_chunk(tmp_path / "none.log", 0, 3, final=True)
