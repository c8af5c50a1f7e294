"""Reading an attempt's log file in byte-offset chunks without splitting UTF-8 characters."""

from __future__ import annotations

import codecs
from pathlib import Path

from onecluster.errors import ValidationError

__all__ = ["MIN_CHUNK", "read_chunk"]

#: The smallest ``limit`` accepted: one whole UTF-8 character always fits.
MIN_CHUNK = 4


def read_chunk(path: Path, offset: int, limit: int, *, final: bool) -> tuple[str, int]:
    """``(text, next_offset)`` for at most ``limit`` bytes of ``path`` from byte ``offset``.

    While more may be written (``final`` is False, or the chunk stopped short of the end) an
    incomplete character at the end is left for the next read; undecodable bytes become
    U+FFFD.  A missing file reads as empty.  Raises :class:`ValidationError` for a negative
    offset or a limit under :data:`MIN_CHUNK`.
    """
    if offset < 0:
        msg = f"a log offset cannot be negative (got {offset})"
        raise ValidationError(msg)
    if limit < MIN_CHUNK:
        msg = f"a log chunk must allow at least {MIN_CHUNK} bytes (got {limit})"
        raise ValidationError(msg)
    try:
        with path.open("rb") as f:
            f.seek(offset)
            data = f.read(limit)
            at_end = not f.read(1)
    except FileNotFoundError:
        return "", offset
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data, final=final and at_end)
    pending, _ = decoder.getstate()
    return text, offset + len(data) - len(pending)
