"""Following bytes: plain lines where stdout is no terminal (on a change of state, at most
every few seconds between), a Rich bar on a terminal; the rate estimated when none is given."""

from __future__ import annotations

import io

from rich.console import Console

from onecluster.cli._progress import PlainProgress, RichProgress, Snapshot, follow, progress_for


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_plain_lines_on_a_change_of_state_and_every_five_seconds() -> None:
    lines: list[str] = []
    clock = Clock()
    plain = PlainProgress("scan /d at tokyo", lines.append, clock=clock)
    plain.show(Snapshot(state="queued", done=0, total=None))
    clock.now = 1.0
    plain.show(Snapshot(state="scanning", done=0, total=4_000_000_000))
    clock.now = 2.0
    plain.show(Snapshot(state="scanning", done=1_000_000_000, total=4_000_000_000))
    clock.now = 6.5
    plain.show(Snapshot(state="scanning", done=2_000_000_000, total=4_000_000_000, note="x"))
    assert lines == [
        "scan /d at tokyo: queued, 0 B of ?, -, ETA -",
        "scan /d at tokyo: scanning, 0 B of 4.00 GB (0%), -, ETA -",
        # 1 GB in 4.5 s since the last look: 1.78 Gbit/s, 2 GB left.
        "scan /d at tokyo: scanning, 2.00 GB of 4.00 GB (50%), 1.8 Gbit/s, ETA 9s, x",
    ]


def test_a_given_rate_and_eta_are_shown_as_given() -> None:
    lines: list[str] = []
    plain = PlainProgress("t", lines.append, clock=Clock())
    plain.show(Snapshot(state="running", done=5, total=10, rate_bps=8e8, eta_s=90.0))
    assert lines == ["t: running, 5 B of 10 B (50%), 800.0 Mbit/s, ETA 1m30s"]


def test_a_terminal_gets_a_bar_and_json_gets_nothing() -> None:
    out = io.StringIO()
    console = Console(file=out, force_terminal=True, width=120)
    bar = progress_for("push", console)
    assert isinstance(bar, RichProgress)
    with bar:
        bar.show(Snapshot(state="running", done=500_000_000, total=10**9, rate_bps=4e9, eta_s=1.0))
    assert "0.5/1.0 GB" in out.getvalue() and "4.0 Gbit/s ETA 1s" in out.getvalue()
    assert isinstance(progress_for("push", Console(file=io.StringIO())), PlainProgress)
    quiet = io.StringIO()
    with progress_for("push", Console(file=quiet, force_terminal=True), quiet=True) as silent:
        silent.show(Snapshot(state="running", done=1, total=2))
    assert quiet.getvalue() == ""


def test_follow_shows_every_answer_until_one_has_ended() -> None:
    answers = iter([1, 2, 3])
    shown: list[int] = []
    assert follow(lambda: next(answers), ended=lambda n: n >= 2, show=shown.append, interval=0) == 2
    assert shown == [1, 2]
