"""Following a scan or a transfer until it ends: polling, and showing its bytes as it goes.

On a terminal the bytes show as a Rich progress bar (done of total, rate, ETA and a note:
the paths in use, the files read); elsewhere (a pipe, a log file) as one plain line when the
state changes and at most every few seconds between, so a CI log stays short and still
shows that it moves.  :func:`follow` polls like ``logs --follow`` and ``sites --wait-up``:
ask, show, stop once it has ended, else wait ``interval`` seconds and ask again.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Protocol, TypeVar

from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TaskID, TextColumn

from onecluster.cli._render import format_bytes, format_duration, format_rate

__all__ = ["ByteProgress", "PlainProgress", "RichProgress", "Snapshot", "follow", "progress_for"]

T = TypeVar("T")

#: Seconds between two plain progress lines while nothing but the bytes change.
PLAIN_EVERY_S = 5.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Snapshot:
    """One look at something that moves bytes: its state, bytes done of ``total`` (``None``
    while unknown), its rate in bits per second and the seconds left (``None``: estimated
    here from the last two looks), and a note."""

    state: str
    done: int
    total: int | None
    rate_bps: float | None = None
    eta_s: float | None = None
    note: str = ""


class ByteProgress(Protocol):
    """A display of :class:`Snapshot` s, used as a context manager."""

    def show(self, snapshot: Snapshot) -> None:
        """Show the latest snapshot."""
        ...

    def __enter__(self) -> ByteProgress: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


class _Estimate:
    """The rate and ETA of snapshots that carry none, from the last two looks."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._last: tuple[float, int] | None = None
        self._rate: float | None = None

    def fill(self, snapshot: Snapshot) -> tuple[float | None, float | None]:
        now = self._clock()
        if snapshot.rate_bps is not None:
            return snapshot.rate_bps, snapshot.eta_s
        if self._last is not None and now > self._last[0] and snapshot.done >= self._last[1]:
            self._rate = (snapshot.done - self._last[1]) * 8 / (now - self._last[0])
        self._last = (now, snapshot.done)
        eta = None
        if self._rate and snapshot.total is not None:
            eta = max(0, snapshot.total - snapshot.done) * 8 / self._rate
        return self._rate, eta


class RichProgress:
    """A Rich progress bar on ``console``: ``label``, bar, bytes done of total, rate, ETA,
    note."""

    def __init__(self, label: str, console: Console, *, clock: Callable[[], float]) -> None:
        self._estimate = _Estimate(clock)
        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            DownloadColumn(),
            TextColumn("{task.fields[rate]}"),
            TextColumn("ETA {task.fields[eta]}"),
            TextColumn("[dim]{task.fields[note]}"),
            console=console,
            auto_refresh=False,
        )
        self._task: TaskID = self._progress.add_task(label, total=None, rate="-", eta="-", note="")

    def show(self, snapshot: Snapshot) -> None:
        rate, eta = self._estimate.fill(snapshot)
        self._progress.update(
            self._task,
            completed=snapshot.done,
            total=snapshot.total,
            rate=format_rate(rate),
            eta=format_duration(eta),
            note=f"{snapshot.state} {snapshot.note}".strip(),
        )
        self._progress.refresh()

    def __enter__(self) -> RichProgress:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._progress.stop()


class PlainProgress:
    """One plain line per change of state, and at most every :data:`PLAIN_EVERY_S` seconds
    while only the bytes move."""

    def __init__(
        self, label: str, write: Callable[[str], None], *, clock: Callable[[], float]
    ) -> None:
        self._label = label
        self._write = write
        self._clock = clock
        self._estimate = _Estimate(clock)
        self._said: tuple[str, float] | None = None

    def show(self, snapshot: Snapshot) -> None:
        rate, eta = self._estimate.fill(snapshot)
        now = self._clock()
        if (
            self._said is not None
            and self._said[0] == snapshot.state
            and now - self._said[1] < PLAIN_EVERY_S
        ):
            return
        self._said = (snapshot.state, now)
        share = f" ({snapshot.done / snapshot.total:.0%})" if snapshot.total else ""
        line = (
            f"{self._label}: {snapshot.state}, {format_bytes(snapshot.done)} of "
            f"{format_bytes(snapshot.total)}{share}, {format_rate(rate)}, "
            f"ETA {format_duration(eta)}"
        )
        self._write(f"{line}, {snapshot.note}" if snapshot.note else line)

    def __enter__(self) -> PlainProgress:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


class _Silent:
    def show(self, snapshot: Snapshot) -> None:
        return None

    def __enter__(self) -> _Silent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None


def progress_for(label: str, console: Console, *, quiet: bool = False) -> ByteProgress:
    """A Rich bar when ``console`` is a terminal, plain lines on it otherwise, nothing when
    ``quiet`` (``--json``: stdout carries the answer only)."""
    if quiet:
        return _Silent()
    if console.is_terminal:
        return RichProgress(label, console, clock=time.monotonic)
    return PlainProgress(
        label, lambda line: console.print(line, markup=False), clock=time.monotonic
    )


def follow(
    fetch: Callable[[], T],
    *,
    ended: Callable[[T], bool],
    show: Callable[[T], None],
    interval: float,
    first: T | None = None,
) -> T:
    """Ask with ``fetch`` (starting from ``first`` if given) and ``show`` each answer until
    one has ``ended``; ``interval`` seconds between asks."""
    item = fetch() if first is None else first
    while True:
        show(item)
        if ended(item):
            return item
        time.sleep(interval)
        item = fetch()
