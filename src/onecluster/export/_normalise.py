"""A normalised copy of a text for the detectors, with a map back to the original's offsets.

Identifiers hide behind characters that look the same to a person and differ to a regex:
full-width digits (``１３８``), other scripts' digits, typographic dashes and spaces, and
invisible format characters (zero-width space U+200B, joiners, word joiner U+2060, BOM
U+FEFF, bidirectional marks).  :func:`normalise` maps, one character at a time,

* every character whose NFKC form is a single ASCII character to it (full-width forms,
  small forms, superscript digits …), and every decimal digit of any script to its ASCII
  digit;
* every space separator to ``" "`` and every dash punctuation to ``"-"``;
* every format character (Unicode category ``Cf``) to nothing.

The detectors run on the copy; :meth:`Normalised.original_span` turns a span of the copy
back into the span of the original that holds it, so that only those characters are
replaced and everything else is written back as it was.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from dataclasses import dataclass

__all__ = ["Normalised", "needs_normalising", "normalise", "odd_characters", "odd_ranges"]

_IGNORED = "\u200b"  # what every format character becomes before the copy drops it
_IGNORED_RUN = re.compile(_IGNORED + "+")
# Code points scanned for the table: the BMP and plane 1 (scripts, mathematical digits)
# less the blocks that hold none of the characters above (CJK ideographs, Hangul
# syllables, surrogates, private use), and the tag characters (plane 14, all format
# characters).  Planes 2 and 3 hold only ideographs.
_SCANNED = (
    range(0x80, 0x3400),
    range(0x4DC0, 0x4E00),
    range(0xA000, 0xAC00),
    range(0xD7B0, 0xD800),
    range(0xF900, 0x20000),
    range(0xE0000, 0xE0080),
)


@functools.cache
def _table() -> dict[int, int]:
    """The one-character mapping described above (computed once, on first use)."""
    table: dict[int, int] = {}
    for block in _SCANNED:
        for cp in block:
            ch = chr(cp)
            category = unicodedata.category(ch)
            if category == "Cf":
                table[cp] = ord(_IGNORED)
            elif category == "Zs":
                table[cp] = 0x20
            elif category == "Pd":
                table[cp] = 0x2D
            elif category == "Nd":
                table[cp] = 0x30 + unicodedata.decimal(ch)
            else:
                folded = unicodedata.normalize("NFKC", ch)
                if len(folded) == 1 and folded.isascii():
                    table[cp] = ord(folded)
    return table


# Full-width punctuation that Chinese text is full of (，：；？！（） …) and that no
# identifier holds unless it also holds full-width digits or letters, which send the text
# down the slow path anyway; kept out of the trigger so that ordinary prose stays fast.
_PROSE = frozenset(range(0xFF01, 0xFF0B)) | {0xFF0C, 0xFF0F} | frozenset(range(0xFF1A, 0xFF20))
_PROSE |= frozenset(range(0xFF3B, 0xFF41)) | frozenset(range(0xFF5B, 0xFF5F))


@functools.cache
def odd_ranges() -> tuple[tuple[int, int], ...]:
    """The characters the table changes that matter on their own — their presence sends a
    text down the slow path — as ranges of code points ``(first, last)``."""
    points = sorted(set(_table()) - _PROSE)
    ranges: list[tuple[int, int]] = []
    start = prev = points[0]
    for cp in [*points[1:], -1]:
        if cp == prev + 1:
            prev = cp
            continue
        ranges.append((start, prev))
        start = prev = cp
    return tuple(ranges)


@functools.cache
def odd_characters() -> tuple[re.Pattern[str], re.Pattern[str]]:
    """:func:`odd_ranges` as two ``re`` classes, the BMP's and the others', because ``re``
    tests a class of BMP characters with one table lookup and a class with any other
    character range by range."""

    def members(ranges: list[tuple[int, int]]) -> re.Pattern[str]:
        return re.compile(
            "["
            + "".join(
                re.escape(chr(a)) + ("-" + re.escape(chr(b)) if b > a else "") for a, b in ranges
            )
            + "]"
        )

    ranges = odd_ranges()
    return members([r for r in ranges if r[1] <= 0xFFFF]), members(
        [r for r in ranges if r[1] > 0xFFFF]
    )


def needs_normalising(text: str) -> bool:
    """Whether ``text`` holds a character that :func:`normalise` would change."""
    if text.isascii():
        return False
    bmp, astral = odd_characters()
    if bmp.search(text):
        return True
    # A character outside the BMP takes four bytes in UTF-16: a test at C speed, where
    # ``re`` tests a class of such characters range by range.
    return len(text.encode("utf-16-le", "surrogatepass")) > 2 * len(text) and bool(
        astral.search(text)
    )


@dataclass(frozen=True, slots=True)
class Normalised:
    """The normalised copy of a text and the way back.

    The copy keeps one character per original character except the format characters it
    dropped; ``_starts[i]`` is where the *i*-th run of kept characters begins in the copy
    and ``_shifts[i]`` how many characters were dropped before it.
    """

    text: str
    _starts: tuple[int, ...] = (0,)
    _shifts: tuple[int, ...] = (0,)

    @property
    def same_offsets(self) -> bool:
        """Whether every offset of the copy is the same in the original (nothing dropped)."""
        return len(self._starts) == 1

    def _original(self, index: int) -> int:
        return index + self._shifts[bisect.bisect_right(self._starts, index) - 1]

    def original_span(self, start: int, end: int) -> tuple[int, int]:
        """The span of the original text that holds the copy's ``[start, end)`` (``end`` >
        ``start``): from its first to its last character, with any dropped characters
        between them and none around them."""
        return self._original(start), self._original(end - 1) + 1


def normalise(text: str) -> Normalised:
    """The normalised copy of ``text`` (see the module's docstring)."""
    if not needs_normalising(text):
        return Normalised(text)
    mapped = text.translate(_table())
    if _IGNORED not in mapped:
        return Normalised(mapped)
    parts: list[str] = []
    starts, shifts = [0], [0]
    position = dropped = 0
    for run in _IGNORED_RUN.finditer(mapped):
        parts.append(mapped[position : run.start()])
        starts.append(run.start() - dropped)
        dropped += run.end() - run.start()
        shifts.append(dropped)
        position = run.end()
    parts.append(mapped[position:])
    return Normalised("".join(parts), tuple(starts), tuple(shifts))
