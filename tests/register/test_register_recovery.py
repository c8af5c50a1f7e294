"""After a crash: a torn tail is cut off and nothing before it is lost; a real writer
killed with SIGKILL mid-append loses no entry whose append had returned."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from onecluster.clock import ManualClock
from onecluster.errors import IntegrityError
from onecluster.register import Register, verify
from onecluster.register._files import pending_record

from .conftest import append_together, intent

ENTRIES, CHECKPOINTS = "entries.jsonl", "checkpoints.jsonl"


def _five(directory: Path, clock: ManualClock) -> bytes:
    with Register.open(directory, clock=clock, group_wait_s=0) as reg:
        for n in range(5):
            reg.append(intent(n))
    return (directory / ENTRIES).read_bytes()


@pytest.mark.parametrize(
    "tail",
    [
        b'{"at":"2026-11-20T12:00:00.000000Z","export":"exp-5","se',  # no newline
        b"\x00\x00\x00\x00",  # a block of zeros (power loss)
        b"not json\n",  # a last line that does not parse
    ],
)
def test_a_torn_tail_is_cut_off_and_kept_aside(
    tmp_path: Path, clock: ManualClock, tail: bytes
) -> None:
    directory = tmp_path / "r"
    before = _five(directory, clock)
    with (directory / ENTRIES).open("ab") as f:
        f.write(tail)
    with pytest.raises(IntegrityError, match=r"entry 5 .* not covered"):
        verify(directory)
    with Register.open(directory, clock=clock) as reg:
        assert reg.size == 5
        assert (directory / ENTRIES).read_bytes() == before
        assert (directory / "dropped.jsonl").read_bytes().startswith(tail)
        assert reg.append(intent(5)).seq == 5
    assert verify(directory).entries_checked == 6


def _crash_before_the_last_checkpoint(directory: Path) -> list[bytes]:
    """The files as a crash leaves them after the last batch's entries were written and
    before its checkpoint was: pending.json names the batch.  Returns the batch's lines."""
    checkpoints = (directory / CHECKPOINTS).read_bytes().splitlines(keepends=True)
    last = json.loads(checkpoints[-1])
    first = last["size"] - len(last["leaves"])
    (directory / CHECKPOINTS).write_bytes(b"".join(checkpoints[:-1]))
    leaves = [bytes.fromhex(h) for h in last["leaves"]]
    (directory / "pending.json").write_bytes(pending_record(first, leaves))
    return (directory / ENTRIES).read_bytes().splitlines(keepends=True)[first:]


def test_a_batch_whose_checkpoint_was_never_written_is_dropped(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "r"
    with Register.open(directory, clock=clock, group_wait_s=0.05) as reg:
        reg.append(intent(0))
        append_together(reg, [intent(n) for n in range(1, 6)])
    batch = _crash_before_the_last_checkpoint(directory)
    with Register.open(directory, clock=clock) as reg:
        assert reg.size == 6 - len(batch)
    assert (directory / "dropped.jsonl").read_bytes() == b"".join(batch)
    assert (directory / "pending.json").read_bytes() == b""
    assert verify(directory).entries_checked == 6 - len(batch)


def test_a_batch_cut_short_inside_a_line_is_dropped(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "r"
    _five(directory, clock)
    batch = _crash_before_the_last_checkpoint(directory)
    data = (directory / ENTRIES).read_bytes()
    (directory / ENTRIES).write_bytes(data[: len(data) - len(batch[-1]) // 2])
    with Register.open(directory, clock=clock) as reg:
        assert reg.size == 4


def test_uncovered_entries_the_pending_batch_does_not_name_are_refused(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "r"
    _five(directory, clock)
    _crash_before_the_last_checkpoint(directory)
    (directory / "pending.json").write_bytes(pending_record(4, [bytes(32)]))
    with pytest.raises(IntegrityError, match=r"^entry 4 \(line 5 .* nor is it in the batch"):
        Register.open(directory, clock=clock)


def test_a_torn_checkpoint_is_dropped_and_a_whole_one_missing_its_newline_kept(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "r"
    _five(directory, clock)
    data = (directory / CHECKPOINTS).read_bytes()
    (directory / CHECKPOINTS).write_bytes(data[:-1])  # only the newline lost
    with Register.open(directory, clock=clock) as reg:
        assert reg.size == 5
    assert (directory / CHECKPOINTS).read_bytes() == data
    _crash_before_the_last_checkpoint(directory)
    (directory / CHECKPOINTS).write_bytes(data[:-40])  # cut inside the signature
    with Register.open(directory, clock=clock) as reg:
        assert reg.size == 4
    assert verify(directory).entries_checked == 4


def test_a_checkpoint_whose_newline_was_replaced_is_refused(
    tmp_path: Path, clock: ManualClock
) -> None:
    directory = tmp_path / "r"
    _five(directory, clock)
    data = (directory / CHECKPOINTS).read_bytes()
    (directory / CHECKPOINTS).write_bytes(data[:-1] + b" ")
    with pytest.raises(IntegrityError, match="entry 4 "):
        Register.open(directory, clock=clock)
    assert (directory / CHECKPOINTS).read_bytes() == data[:-1] + b" "  # left as found


def test_entries_without_any_checkpoint_are_refused(tmp_path: Path, clock: ManualClock) -> None:
    directory = tmp_path / "r"
    before = _five(directory, clock)
    (directory / CHECKPOINTS).write_bytes(b"")
    with pytest.raises(IntegrityError, match=r"entry 0 .* checkpoints\.jsonl is empty"):
        Register.open(directory, clock=clock)
    assert (directory / ENTRIES).read_bytes() == before


_CHILD = r"""
import sys, threading
from pathlib import Path
from onecluster.register import Register

reg = Register.open(Path(sys.argv[1]), group_wait_s=0.0005)
lock = threading.Lock()

def run(t):
    i = 0
    while True:
        receipt = reg.append({"thread": t, "i": i, "pad": "x" * (i % 97)})
        with lock:
            sys.stdout.write(f"{receipt.seq} {t} {i}\n")
            sys.stdout.flush()
        i += 1

for t in range(4):
    threading.Thread(target=run, args=(t,), daemon=True).start()
threading.Event().wait()
"""


def test_sigkill_mid_append_loses_no_acknowledged_entry(tmp_path: Path) -> None:
    directory = tmp_path / "r"
    acknowledged: dict[int, tuple[int, int]] = {}
    for round_ in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(directory)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert child.stdout is not None
        for seen, line in enumerate(child.stdout, start=1):  # its acknowledgements
            seq, t, i = (int(x) for x in line.split())
            acknowledged[seq] = (t, i)
            if seen >= 150 + 37 * round_:
                break
        os.kill(child.pid, signal.SIGKILL)
        # what it printed after the kill decision but before dying was acknowledged too
        rest, err = child.communicate()
        for line in rest.splitlines():
            if line.count(b" ") == 2:
                seq, t, i = (int(x) for x in line.split())
                acknowledged[seq] = (t, i)
        assert child.returncode == -signal.SIGKILL, err.decode()
        with Register.open(directory) as reg:
            entries = reg.entries()
            assert reg.size >= max(acknowledged) + 1
        for seq, (t, i) in acknowledged.items():
            assert (entries[seq]["thread"], entries[seq]["i"]) == (t, i)
        report = verify(directory)
        assert report.entries_checked == len(entries)
    assert len(acknowledged) >= 600
    assert json.loads((directory / CHECKPOINTS).read_text().splitlines()[-1])["size"] == len(
        entries
    )
