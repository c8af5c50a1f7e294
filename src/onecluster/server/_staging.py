"""The reconcile loop's staging phase: every attempt whose job names a registered dataset
waits, unhanded to its agent, until its site holds the version chosen for it.

Each pass looks at every waiting attempt once:

- its site holds all of the dataset's latest version → the attempt is handed out with the
  replica's directory in ``$ONECLUSTER_DATASET_DIR``;
- it does not → a *prefetch* transfer brings it (one already on its way there is reused),
  and the job's ``reason`` shows how far it is: ``waiting for data: 37 % of cc-zh (1.2 of
  3.1 GB) from shanghai, transfer t-…``;
- the transfer failed or was cancelled, or no site holds all of the version → the run ends
  and the job fails with that reason (its data cannot come; another site would fare no
  better, and a retry would loop).

The simulator models the same: a start whose dataset is missing holds its GPUs for the
staging time, then runs (``simulate/_staging.py``).
"""

from __future__ import annotations

import logging

from onecluster.errors import ConflictError, ForbiddenError, NotFoundError
from onecluster.server._data_control import DataControl
from onecluster.store import STAGE_CHECK, StagingAttempt, TransferRecord

__all__ = ["stage_attempts"]

_log = logging.getLogger("onecluster.reconcile")


def stage_attempts(data: DataControl) -> int:
    """One pass over the waiting attempts; how many were handed out."""
    waiting = data.store.staging_attempts()
    if not waiting:
        return 0
    latest = data.reload().latest
    ready = 0
    for attempt in waiting:
        try:
            ready += _stage(data, attempt, latest.get(attempt.dataset))
        except ForbiddenError as exc:
            _fail(data, attempt, f"its dataset {attempt.dataset} cannot come: {exc.message}")
        except (ConflictError, NotFoundError) as exc:
            _fail(data, attempt, f"no site holds all of {attempt.dataset}: {exc.message}")
    return ready


def _stage(data: DataControl, attempt: StagingAttempt, locality: object) -> int:
    now = data.clock.now()
    if attempt.data_wait == STAGE_CHECK:
        if locality is None:  # its versions are gone: nothing to wait for
            data.store.data_ready(attempt.attempt_id, "", now=now)
            return 1
        root = locality.root  # type: ignore[attr-defined]
        transfer = data.prefetch(attempt.dataset, root, attempt.site, attempt.job_id)
    else:
        transfer = data.store.transfer(attempt.data_wait)
    if transfer.state == "done":
        path = data.store.replica_path(transfer.dataset, transfer.root, attempt.site)
        if path is None:  # the replica is reported with the transfer; wait for it
            data.store.data_waits(attempt.attempt_id, transfer.id, _progress(transfer), now=now)
            return 0
        data.store.data_ready(attempt.attempt_id, path, now=now)
        return 1
    if transfer.state in ("failed", "cancelled"):
        why = transfer.error or f"transfer {transfer.id} was cancelled"
        _fail(data, attempt, f"its dataset {attempt.dataset} could not reach {attempt.site}: {why}")
        return 0
    data.store.data_waits(attempt.attempt_id, transfer.id, _progress(transfer), now=now)
    return 0


def _fail(data: DataControl, attempt: StagingAttempt, message: str) -> None:
    _log.warning("job %s: %s", attempt.job_id, message)
    data.store.data_failed(attempt.attempt_id, message, now=data.clock.now())


def _progress(t: TransferRecord) -> str:
    """What a waiting job's ``reason`` says."""
    share = 100 * t.bytes_done / t.bytes_total if t.bytes_total else 0.0
    state = "" if t.state == "running" else f", {t.state}"
    return (
        f"waiting for data: {share:.0f} % of {t.dataset} ({t.bytes_done / 1e9:.2f} of "
        f"{t.bytes_total / 1e9:.2f} GB) from {t.src} to {t.dst}, transfer {t.id}{state}"
    )
