"""What a push decides inside its transaction: which version, from where, and the new
transfer's row (a transfer created ``done`` had everything at its destination already)."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Sequence

from onecluster.errors import ConflictError, NotFoundError
from onecluster.store._data_records import VersionRecord
from onecluster.store._tables import TransferRow

__all__ = ["SourceRanking", "new_id", "pick_source", "pick_version", "transfer_row"]

#: Orders the sites holding a complete replica (given sorted, never empty) from the best
#: source to the worst; it returns every one of them.
SourceRanking = Callable[[Sequence[str]], Sequence[str]]


def new_id(prefix: str) -> str:
    """A unique id that sorts in creation order (as job ids do)."""
    return f"{prefix}-{time.time_ns() // 1000:013x}{secrets.token_hex(3)}"


def pick_version(
    dataset: str, versions: Sequence[VersionRecord], root: str | None
) -> VersionRecord:
    """The version asked for (the latest when ``root`` is ``None``)."""
    if not versions:
        msg = f"dataset {dataset} has no scanned version yet: there is nothing to send"
        raise ConflictError(
            msg,
            hint=f"run onecluster dataset add {dataset} --site SITE --path DIR first",
        )
    if root is None:
        return versions[0]
    for version in versions:
        if version.root == root:
            return version
    known = ", ".join(v.root[:12] for v in versions[:10])
    msg = f"dataset {dataset} has no version {root}"
    raise NotFoundError(msg, hint=f"its versions, newest first: {known}")


def pick_source(
    version: VersionRecord, complete: Sequence[str], src: str | None, rank: SourceRanking
) -> str:
    """``src`` if it holds all of ``version``, else the best-ranked site that does."""
    name = f"{version.dataset}@{version.root[:12]}"
    if src is not None:
        if src in complete:
            return src
        where = ", ".join(complete) if complete else "no site"
        msg = f"site {src} holds no complete replica of {name}: it cannot send it"
        raise ConflictError(msg, hint=f"complete replicas: {where}; or leave --from out")
    if not complete:
        partial = sorted(r.site for r in version.replicas)
        also = f" (partial ones at {', '.join(partial)})" if partial else ""
        msg = f"no site holds a complete replica of {name}{also}: there is nothing to send from"
        raise ConflictError(
            msg, hint=f"rescan it where it lives: onecluster dataset add {version.dataset} …"
        )
    return rank(complete)[0]


def transfer_row(
    version: VersionRecord, src: str, dst: str, now: float, *, state: str, job_id: str | None = None
) -> TransferRow:
    """A new transfer of ``version``; one created ``done`` had everything at ``dst`` already;
    with ``job_id``, the prefetch of that job's dataset."""
    done = state == "done"
    return TransferRow(
        id=new_id("t"),
        dataset=version.dataset,
        root=version.root,
        src=src,
        dst=dst,
        reason="push" if job_id is None else "prefetch",
        job_id=job_id,
        state=state,
        bytes_total=version.bytes,
        bytes_done=version.bytes if done else 0,
        bytes_sent=0,
        bytes_local=version.bytes if done else 0,
        chunks_total=version.chunks,
        chunks_done=version.chunks if done else 0,
        chunks_sent=0,
        paths=[],
        rate_bps=0.0,
        error=None,
        ticket=secrets.token_urlsafe(24),
        created_at=now,
        started_at=now if done else None,
        finished_at=now if done else None,
    )
