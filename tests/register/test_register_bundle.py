"""The monthly bundle: the month's entries with proofs, the signed head and header, the
previous month's head; it verifies offline and any tampering with it is named."""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onecluster.clock import ManualClock
from onecluster.errors import ConflictError, IntegrityError, ValidationError
from onecluster.register import Register, verify, write_bundle

OCTOBER_END = datetime(2026, 10, 31, 23, 0, tzinfo=UTC).timestamp()


def _month_of_exports(register: Register, clock: ManualClock) -> None:
    """Exports 0–2 asked in October; 0 completes in October, 1 in November; 2 fails in
    November; 3 is asked and refused in November; 4 is asked in November, still running."""
    for n in range(3):
        register.append(
            {"type": "intent", "export": f"x{n}", "dataset": "notes", "bytes": 100 * n,
             "relays": ["hk"], "categories": ["health"], "individuals": n}
        )  # fmt: skip
    register.append({"type": "complete", "export": "x0", "bytes_sent": 0, "content_hash": "aa"})
    clock.set(OCTOBER_END + 7200)  # November 1st, 01:00
    register.append({"type": "complete", "export": "x1", "bytes_sent": 100, "content_hash": "bb"})
    register.append({"type": "failed", "export": "x2", "reason": "destination unreachable"})
    register.append({"type": "intent", "export": "x3", "dataset": "=cmd()", "personal": True})
    register.append({"type": "refused", "export": "x3", "reason": "no approval"})
    register.append({"type": "intent", "export": "x4", "dataset": "images", "route": "SC"})
    register.append({"note": "an entry of no export"})


@pytest.fixture
def november(tmp_path: Path) -> Iterator[tuple[Register, Path]]:
    clock = ManualClock(OCTOBER_END - 3600)
    with Register.open(tmp_path / "register", clock=clock, group_wait_s=0) as reg:
        _month_of_exports(reg, clock)
        summary = write_bundle(reg, "2026-11", tmp_path / "bundle")
        assert (summary.month, summary.count, summary.exports) == ("2026-11", 6, 5)
        assert summary.head_size == 10 and summary.path == tmp_path / "bundle"
        yield reg, summary.path


def test_the_bundle_verifies_with_the_pinned_key(november: tuple[Register, Path]) -> None:
    register, bundle = november
    report = verify(bundle, public_key=register.public_key())
    assert (report.kind, report.month, report.first, report.last) == ("bundle", "2026-11", 4, 9)
    assert report.entries_checked == 6 and report.size == 10
    assert report.root == register.head().root.hex()
    assert verify(bundle) == report  # with the bundle's own key, the same


def test_the_bundle_holds_the_month_and_the_previous_month_s_head(
    november: tuple[Register, Path],
) -> None:
    register, bundle = november
    assert sorted(p.name for p in bundle.iterdir()) == [
        "bundle.json", "entries.jsonl", "exports.csv", "exports.json", "head.json",
        "previous.json", "proofs.jsonl", "public.key", "register.html",
    ]  # fmt: skip
    lines = (bundle / "entries.jsonl").read_bytes().splitlines()
    assert lines == [register.entry_bytes(seq) for seq in range(4, 10)]
    header = json.loads((bundle / "bundle.json").read_text())
    assert (header["first_seq"], header["last_seq"], header["count"]) == (4, 9, 6)
    assert header["head"]["size"] == 10
    previous = json.loads((bundle / "previous.json").read_text())
    assert previous["head"]["size"] == 4  # the last head signed in October
    assert previous["head"]["timestamp"] < "2026-11-01"


def test_the_first_month_has_no_previous_head(
    november: tuple[Register, Path], tmp_path: Path
) -> None:
    register, _ = november
    summary = write_bundle(register, "2026-10", tmp_path / "october")
    assert summary.count == 4 and summary.exports == 3
    report = verify(summary.path)
    assert (report.first, report.last, report.heads_checked) == (0, 3, 1)
    assert not (summary.path / "previous.json").exists()


def test_a_previous_head_of_the_empty_tree_needs_no_proof(tmp_path: Path) -> None:
    clock = ManualClock(OCTOBER_END - 40 * 86400)  # opened in September, used in October
    with Register.open(tmp_path / "r", clock=clock, group_wait_s=0) as reg:
        clock.set(OCTOBER_END)
        reg.append({"type": "intent", "export": "x"})
        summary = write_bundle(reg, "2026-10", tmp_path / "october")
    previous = json.loads((summary.path / "previous.json").read_text())
    assert previous["head"]["size"] == 0 and previous["consistency"] == []
    assert verify(summary.path).heads_checked == 2


def test_an_empty_month_and_a_month_before_the_register(
    november: tuple[Register, Path], tmp_path: Path
) -> None:
    register, _ = november
    for month in ("2026-12", "2020-01"):
        summary = write_bundle(register, month, tmp_path / month)
        assert summary.count == 0 and summary.exports == 0
        report = verify(summary.path)
        assert report.entries_checked == 0 and report.first is None
    assert not (tmp_path / "2020-01" / "previous.json").exists()
    assert "no exports this month" in (tmp_path / "2026-12" / "register.html").read_text()


@pytest.mark.parametrize("month", ["2026-13", "2026-1", "26-11", "2026/11", "", "2026-00"])
def test_a_malformed_month_is_refused(november: tuple[Register, Path], month: str) -> None:
    register, bundle = november
    with pytest.raises(ValidationError, match="YYYY-MM"):
        write_bundle(register, month, bundle.parent / "other")


def test_a_bundle_is_not_written_over_files(november: tuple[Register, Path]) -> None:
    register, bundle = november
    with pytest.raises(ConflictError):
        write_bundle(register, "2026-11", bundle)


def test_the_views_have_one_row_per_export(november: tuple[Register, Path]) -> None:
    _, bundle = november
    with (bundle / "exports.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    by_export = {row["export"]: row for row in rows}
    assert list(by_export) == ["x1", "x2", "x3", "x4", "(entry 9)"]
    assert by_export["x1"]["status"] == "complete" and by_export["x1"]["bytes_sent"] == "100"
    assert by_export["x1"]["sent_content_hash"] == "bb" and by_export["x1"]["seqs"] == "4"
    assert by_export["x2"]["status"] == "failed"
    assert by_export["x2"]["reason"] == "destination unreachable"
    assert by_export["x3"]["status"] == "refused" and by_export["x3"]["seqs"] == "6; 7"
    assert by_export["x3"]["dataset"] == "'=cmd()"  # never a spreadsheet formula
    assert by_export["x3"]["personal"] == "yes"
    assert by_export["x4"]["status"] == "in progress" and by_export["x4"]["route"] == "SC"
    assert by_export["x4"]["requested_at"].startswith("2026-11-01T01:00")
    exports = json.loads((bundle / "exports.json").read_text())["exports"]
    assert exports[2]["seqs"] == [6, 7] and exports[2]["dataset"] == "=cmd()"


class _Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.rows = 0
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.rows += tag == "tr"

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def test_the_printable_page(november: tuple[Register, Path]) -> None:
    _, bundle = november
    html = (bundle / "register.html").read_text()
    page = _Page()
    page.feed(html)
    assert "script" not in page.tags and "@media print" in html
    assert page.rows == 1 + 5  # the header row and one per export
    text = "".join(page.text)
    assert "destination unreachable" in text and "2026-11" in text


# -- tampering with the bundle ----------------------------------------------------------


def _copy(bundle: Path, tmp_path: Path) -> Path:
    return Path(shutil.copytree(bundle, tmp_path / "copy"))


def _rewrite(path: Path, old: bytes, new: bytes) -> None:
    data = path.read_bytes()
    assert old in data
    path.write_bytes(data.replace(old, new, 1))


def test_an_edited_entry_is_named(november: tuple[Register, Path], tmp_path: Path) -> None:
    register, bundle = november
    copy = _copy(bundle, tmp_path)
    _rewrite(copy / "entries.jsonl", b"destination unreachable", b"destination unreachablE")
    with pytest.raises(IntegrityError, match=r"^entry 5 \(line 2 of entries\.jsonl\): its hash"):
        verify(copy, public_key=register.public_key())


@pytest.mark.parametrize(
    ("keep", "named"),
    [
        (slice(0, 4), r"^entry 8 \(line 5 of entries\.jsonl\) is missing"),  # truncated
        (slice(1, 6), r"^entry 4 \(line 1 of entries\.jsonl\)"),  # the first one cut
    ],
)
def test_a_bundle_cut_short_is_refused(
    november: tuple[Register, Path], tmp_path: Path, keep: slice, named: str
) -> None:
    _, bundle = november
    for name in ("entries.jsonl", "proofs.jsonl"):
        copy = _copy(bundle, tmp_path / name)
        lines = (copy / name).read_bytes().splitlines(keepends=True)
        (copy / name).write_bytes(b"".join(lines[keep]))
        with pytest.raises(IntegrityError):
            verify(copy)
    copy = _copy(bundle, tmp_path / "both")
    for name in ("entries.jsonl", "proofs.jsonl"):
        lines = (copy / name).read_bytes().splitlines(keepends=True)
        (copy / name).write_bytes(b"".join(lines[keep]))
    with pytest.raises(IntegrityError, match=named):
        verify(copy)


def test_a_header_that_hides_entries_is_refused(
    november: tuple[Register, Path], tmp_path: Path
) -> None:
    _, bundle = november
    copy = _copy(bundle, tmp_path)
    header = json.loads((copy / "bundle.json").read_text())
    header["count"], header["last_seq"] = 4, 7
    (copy / "bundle.json").write_text(json.dumps(header, indent=2, sort_keys=True) + "\n")
    with pytest.raises(IntegrityError, match=r"bundle\.json, the signed header"):
        verify(copy)


@pytest.mark.parametrize(
    ("name", "old", "new", "words"),
    [
        ("head.json", b'"size": 10', b'"size": 11', "signed tree head of size 11"),
        ("previous.json", b'"size": 4', b'"size": 3', "size 3"),
        ("proofs.jsonl", b'"seq":5', b'"seq":6', r"entry 5 \(line 2"),
        ("bundle.json", b'"month": "2026-11"', b'"month": "2026-10"', "signed header"),
        ("bundle.json", b'"count": 6', b'"count":  6', "not spelled as the bundle writes"),
    ],
)
def test_edits_elsewhere_are_refused(
    november: tuple[Register, Path],
    tmp_path: Path,
    name: str,
    old: bytes,
    new: bytes,
    words: str,
) -> None:
    _, bundle = november
    copy = _copy(bundle, tmp_path)
    _rewrite(copy / name, old, new)
    with pytest.raises(IntegrityError, match=words):
        verify(copy)


def test_every_single_byte_edit_of_the_entries_is_detected(
    november: tuple[Register, Path], tmp_path: Path
) -> None:
    register, bundle = november
    copy = _copy(bundle, tmp_path)
    data = (copy / "entries.jsonl").read_bytes()
    for position in range(0, len(data), 3):
        edited = bytearray(data)
        edited[position] ^= 0x20
        (copy / "entries.jsonl").write_bytes(bytes(edited))
        with pytest.raises(IntegrityError):
            verify(copy, public_key=register.public_key())


def test_a_bundle_re_signed_with_another_key_fails_against_the_pinned_key(
    november: tuple[Register, Path], tmp_path: Path
) -> None:
    register, bundle = november
    copy = _copy(bundle, tmp_path)
    other = Ed25519PrivateKey.generate().public_key().public_bytes_raw()
    (copy / "public.key").write_text(other.hex())
    with pytest.raises(IntegrityError, match="signed header"):
        verify(copy)  # the replaced key did not sign it either
    with pytest.raises(IntegrityError, match="signed header"):
        verify(copy, public_key=other)
    assert verify(copy, public_key=register.public_key()).entries_checked == 6


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        ("exports.csv", lambda b: b + b"x-forged,complete\r\n"),
        ("exports.json", lambda b: b.replace(b'"', b' "', 1)),
        ("register.html", lambda b: b.replace(b"<h1>", b"<h1>Approved: ", 1)),
    ],
)
def test_an_edited_view_of_the_bundle_fails_verify(
    november: tuple[Register, Path], name: str, edit: object
) -> None:
    """Regulators read the CSV and the HTML: an edit there must not pass as verified."""
    _, bundle = november
    target = bundle / name
    before = target.read_bytes()
    target.write_bytes(edit(before))  # type: ignore[operator]
    assert target.read_bytes() != before
    with pytest.raises(
        IntegrityError, match=re.escape(f"{name} is not what the verified entries make")
    ):
        verify(bundle)


def test_a_file_added_to_the_bundle_fails_verify(november: tuple[Register, Path]) -> None:
    _, bundle = november
    (bundle / "extra.txt").write_text("an unsigned note\n")
    with pytest.raises(IntegrityError, match=r"extra\.txt"):
        verify(bundle)
