"""The scheduler's pending queue, kept between reconcile passes instead of re-read each time.

The database stays the truth.  Reading every pending job twice a second would make each pass
cost O(queue) and slow submissions down as the queue grows, so the queue is kept in memory:

- a submission adds its job right after its transaction commits (:meth:`added`);
- a pass removes the jobs it started (:meth:`started`);
- anything else that puts a job back in the queue or takes one out (requeue after preemption
  or a lost site, cancel) bumps :attr:`Store.pending_epoch`, and the next pass reloads the
  whole queue from the database; so does a plan the store only partly applied, and a pass
  more than ``full_reload_s`` after the last reload (a backstop for writers in other
  processes).

A reload reads the database outside the lock; submissions that commit meanwhile are
remembered and merged in, so none is missed and none is queued twice.

Other server replicas take submissions, cancels and agent syncs too.  A mirror told to
:meth:`follow` the database's queue news reads, before each pass, the jobs submitted since
its cursor (wherever they were submitted) and adds those still pending, and reloads the
whole queue when the shared queue epoch moved (a job requeued or cancelled anywhere).
A replica that follows (does not lead) keeps no queue at all (:meth:`stand_by`): it would
only grow, since no pass of its own ever takes a job out; it reads the whole queue afresh
when it takes office (:meth:`resume`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

from onecluster.scheduler import PendingJob, PendingQueue
from onecluster.store import QueueNews

__all__ = ["PendingMirror"]

#: How many started job ids the mirror remembers (oldest forgotten first).
_STARTED_MEMORY = 100_000


class PendingMirror:
    """An in-memory :class:`PendingQueue` that follows the database (thread-safe)."""

    def __init__(
        self,
        load: Callable[[], Iterable[PendingJob]],
        epoch: Callable[[], int],
        *,
        full_reload_s: float = 30.0,
    ) -> None:
        self._load = load
        self._epoch = epoch
        self._full_reload_s = full_reload_s
        self._lock = threading.Lock()
        self._queue = PendingQueue()
        self._seen_epoch: int | None = None  # None: never loaded, or invalidated
        self._loaded_at = 0.0
        self._during_reload: list[PendingJob] | None = None
        # Ids a pass started, so that a submission whose ``added`` call comes late (after a
        # reload already queued the job and a pass started it) does not queue it again.
        self._started: dict[str, None] = {}
        self._news: Callable[[int | None], QueueNews] | None = None
        self._fetch: Callable[[Sequence[str]], Iterable[PendingJob]] | None = None
        self._cursor: int | None = None
        self._shared_epoch: int | None = None
        self._standing_by = False

    def follow(
        self,
        news: Callable[[int | None], QueueNews],
        fetch: Callable[[Sequence[str]], Iterable[PendingJob]],
    ) -> None:
        """Before each pass, also take what other processes did to the queue: ``news``
        (``Store.queue_news``) from the cursor, and ``fetch`` the jobs it names that are
        still pending."""
        self._news = news
        self._fetch = fetch

    def stand_by(self) -> None:
        """This replica does not lead: forget the queue and ignore submissions until
        :meth:`resume` (idempotent)."""
        with self._lock:
            if self._standing_by:
                return
            self._standing_by = True
            self._queue = PendingQueue()
            self._started.clear()
            self._seen_epoch = None

    def resume(self) -> None:
        """This replica leads (again): read the whole queue before the next pass."""
        with self._lock:
            self._standing_by = False
            self._seen_epoch = None
            self._cursor = None

    @property
    def standing_by(self) -> bool:
        """Whether the mirror ignores submissions (:meth:`stand_by`)."""
        return self._standing_by

    def added(self, job: PendingJob) -> None:
        """A submission committed: queue it (idempotent; ignored while standing by)."""
        with self._lock:
            if self._standing_by or job.job_id in self._started:
                return
            if self._during_reload is not None:
                self._during_reload.append(job)
            if job.job_id not in self._queue:
                self._queue.add(job)

    def started(self, job_ids: Iterable[str]) -> None:
        """A pass started these jobs: they are no longer pending."""
        with self._lock:
            for job_id in job_ids:
                self._started[job_id] = None
                if job_id in self._queue:
                    self._queue.remove(job_id)
            while len(self._started) > _STARTED_MEMORY:
                del self._started[next(iter(self._started))]

    def invalidate(self) -> None:
        """Reload from the database before the next pass."""
        with self._lock:
            self._seen_epoch = None

    @contextmanager
    def for_pass(self) -> Iterator[PendingQueue]:
        """The pending queue for one pass, reloaded first if it may be stale.

        Submissions wait while the pass holds the queue (a pass takes milliseconds), so the
        scheduler never reads a queue that another thread is changing.
        """
        self._refresh()
        with self._lock:
            yield self._queue

    def _refresh(self) -> None:
        self._take_news()
        epoch = self._epoch()
        with self._lock:
            fresh = (
                self._seen_epoch == epoch
                and time.monotonic() - self._loaded_at < self._full_reload_s
            )
            if fresh:
                return
            self._during_reload = []
        try:
            loaded = PendingQueue.of(self._load())
        except BaseException:
            with self._lock:
                self._during_reload = None
            raise
        with self._lock:
            assert self._during_reload is not None
            for job in self._during_reload:
                if job.job_id not in loaded:
                    loaded.add(job)
            self._during_reload = None
            self._queue = loaded
            self._seen_epoch = epoch
            self._loaded_at = time.monotonic()

    def _take_news(self) -> None:
        if self._news is None or self._fetch is None:
            return
        news = self._news(self._cursor)
        with self._lock:
            first = self._cursor is None
            moved = news.epoch != self._shared_epoch
            self._cursor = news.cursor
            self._shared_epoch = news.epoch
            if first or moved:
                self._seen_epoch = None  # reload: it reads every job the news named too
                return
            unknown = [j for j in news.submitted if j not in self._queue and j not in self._started]
        if not unknown:
            return
        for job in self._fetch(unknown):
            self.added(job)
