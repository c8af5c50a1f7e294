"""The synchronous SDK over the REST API (used by the CLI, the agent and ``up``)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

from onecluster.client._errors import error_from_response
from onecluster.client._servers import ServerList, describe_tries
from onecluster.client._token import usable_token
from onecluster.errors import NotFoundError, NotLeaderError, PlatformError, UnavailableError
from onecluster.schema import (
    AgentSync,
    AgentSyncReply,
    ApprovalIn,
    ApprovalOut,
    DatasetAdd,
    DatasetOut,
    DrainIn,
    DrainOut,
    EventOut,
    ExportIn,
    ExportOut,
    FabricApply,
    FabricApplyOut,
    FabricOut,
    JobOut,
    JobSubmit,
    LeaderOut,
    LinkOut,
    LogsOut,
    PairCheckOut,
    PushIn,
    RegisterBundleOut,
    RegisterEntriesOut,
    RegisterHeadOut,
    RegisterProofOut,
    RevokeIn,
    RouteTableOut,
    ScanOut,
    SiteOut,
    StatsOut,
    TeamOut,
    TokenCreate,
    TokenOut,
    TransferOut,
    UndrainIn,
    WhyOut,
)

__all__ = ["Client"]

M = TypeVar("M")

_PREFIX = "/api/v1"
_FIRST_PAUSE_S = 0.1  # waiting out an election: the first pause, doubled up to the last
_LAST_PAUSE_S = 1.0


class Client:
    """A connection to a onecluster server, or to several replicas of one.

    Every method raises the :mod:`onecluster.errors` class the server answered with (same
    ``code``), or :class:`UnavailableError` when no server can be reached.  A job id or
    site name is always one path segment (quoted), so no value can change the route; one
    that no route could address (``a/b``, empty) is a :class:`NotFoundError` without asking.
    Not thread-safe: give each thread its own client.

    **Several servers.**  ``base_url`` may name several replicas of one control plane (a
    comma-separated string or a sequence; :class:`ServerList`).  A request goes to the current
    one; where it fails, it is sent again to the next, round-robin, each at most once, and the
    one that answers stays current (:attr:`base_url`).  A request is sent again only where that
    cannot do it twice (decision 161):

    * it never left: the connection could not be made (refused, connect timeout, no free
      connection in the pool);
    * the replica answered 503 (unavailable: it did nothing, e.g. not the leader, or no
      database);
    * it is a ``GET``, which changes nothing, whatever happened to it.

    A ``POST`` that was sent and then timed out or lost its connection may have been done (a
    submission created), so it is not sent again: :class:`UnavailableError` saying that its
    outcome is unknown, naming the replica.  Any other answer (2xx, 4xx, 500) is the answer.
    Errors name every URL tried.  Each try gets the whole ``timeout``.

    **An election.**  Where every replica answered ``not_leader`` (nobody leads yet: a
    leader just died or restarted, and its lease has not run out), the request waits for the
    election and is sent again, for at most ``election_wait_s`` (10 s; a lease is 2 s by
    default), backing off from 0.1 s to 1 s; then :class:`NotLeaderError`.  Safe for a
    ``POST``: a 503 did nothing.
    """

    def __init__(
        self,
        base_url: str | Sequence[str],
        token: str | None = None,
        *,
        timeout: float = 10.0,
        election_wait_s: float = 10.0,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``transport`` replaces the network (e.g. ``httpx.MockTransport`` in tests), and
        ``sleep`` the pause while an election is under way.

        :class:`ValidationError` for a server list that cannot work (:func:`parse_servers`).
        Whitespace around ``token`` is dropped; :class:`AuthError` if it is malformed (see
        :func:`usable_token`).
        """
        headers = {"Authorization": f"Bearer {usable_token(token)}"} if token else {}
        self._servers = ServerList(base_url)
        self._election_wait_s = election_wait_s
        self._sleep = sleep
        # Requests name their server in full; the base URL only serves relative paths.
        self._http = httpx.Client(
            base_url=self._servers.current, headers=headers, timeout=timeout, transport=transport
        )

    @property
    def base_url(self) -> str:
        """The server requests go to first: the one that last answered."""
        return self._servers.current

    @property
    def servers(self) -> ServerList:
        """Every server URL this client may use, and the current one."""
        return self._servers

    # -- plumbing -------------------------------------------------------------------------

    def _request(self, method: str, path: str, *, json: Any = None, params: Any = None) -> Any:
        """One request, failing over between the servers and waiting out an election as the
        class says."""
        waited, pause = 0.0, _FIRST_PAUSE_S
        while True:
            try:
                return self._send(method, path, json=json, params=params)
            except NotLeaderError:
                if waited + pause > self._election_wait_s:
                    raise
                self._sleep(pause)
                waited += pause
                pause = min(2 * pause, _LAST_PAUSE_S)

    def _send(self, method: str, path: str, *, json: Any, params: Any) -> Any:
        """One request, failing over between the servers once each."""
        tries: list[tuple[str, str]] = []
        unavailable: PlatformError | None = None
        electing = True  # every replica so far answered not_leader
        for base in self._servers.rotation():
            try:
                response = self._http.request(method, base + path, json=json, params=params)
            except httpx.TransportError as exc:
                if method != "GET" and not _never_sent(exc):
                    self._servers.failed(base)
                    several = len(self._servers) > 1
                    raise _outcome_unknown(method, path, base, exc, tries, several=several) from exc
                tries.append((base, _reason(exc)))
                electing = False
                self._servers.failed(base)
                if len(self._servers) == 1:
                    msg = f"cannot reach the onecluster server at {base}: {exc}"
                    raise UnavailableError(msg, hint="is `onecluster server` running?") from exc
                continue
            if response.status_code == 503:
                refusal = error_from_response(response)
                electing = electing and isinstance(refusal, NotLeaderError)
                unavailable = refusal
                tries.append((base, f"answered 503: {refusal.message}"))
                self._servers.failed(base)
                if len(self._servers) == 1:
                    raise refusal
                continue
            electing = False
            self._servers.answered(base)
            if response.is_error:
                raise error_from_response(response)
            return response.json()
        msg = f"no onecluster server answered {method} {path}; tried {describe_tries(tries)}"
        hint = unavailable.hint if unavailable is not None and unavailable.hint else None
        if electing:
            raise NotLeaderError(msg, hint=hint)
        raise UnavailableError(msg, hint=hint or "is `onecluster server` running at any of them?")

    def _get(self, path: str, adapter: TypeAdapter[M], **params: Any) -> M:
        query = {k: v for k, v in params.items() if v is not None}
        return adapter.validate_python(self._request("GET", path, params=query))

    def _post(self, path: str, adapter: TypeAdapter[M], body: BaseModel | None = None) -> M:
        # By alias: a field's name on the wire may be a Python keyword (``PushIn``'s "from").
        payload = None if body is None else body.model_dump(mode="json", by_alias=True)
        return adapter.validate_python(self._request("POST", path, json=payload))

    # -- API ------------------------------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """``GET /healthz``: ``status``, and with replicas this one's ``role``, the
        ``leader``'s URL and the ``term``."""
        return _ANY_MAP.validate_python(self._request("GET", "/healthz"))

    def leader(self) -> LeaderOut:
        """Who leads the control plane, and every server replica seen lately."""
        return self._get(f"{_PREFIX}/cluster/leader", _LEADER)

    def sites(self) -> list[SiteOut]:
        """Every site with its status and pools."""
        return self._get(f"{_PREFIX}/sites", _SITES)

    def teams(self) -> list[TeamOut]:
        """Every team with its quota and usage."""
        return self._get(f"{_PREFIX}/teams", _TEAMS)

    def submit(self, body: JobSubmit) -> JobOut:
        """Submit a job (:class:`ImpossibleJobError` if no site could ever run it)."""
        return self._post(f"{_PREFIX}/jobs", _JOB, body)

    def jobs(
        self,
        *,
        state: str | None = None,
        team: str | None = None,
        site: str | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[JobOut]:
        """Jobs, newest first (members see their team's only)."""
        return self._get(
            f"{_PREFIX}/jobs", _JOBS, state=state, team=team, site=site, limit=limit, offset=offset
        )

    def job(self, job_id: str) -> JobOut:
        """One job."""
        return self._get(f"{_PREFIX}/jobs/{_segment(job_id, 'job')}", _JOB)

    def cancel(self, job_id: str) -> JobOut:
        """Cancel a job (:class:`ConflictError` if it already ended)."""
        return self._post(f"{_PREFIX}/jobs/{_segment(job_id, 'job')}/cancel", _JOB)

    def why(self, job_id: str) -> WhyOut:
        """Why a pending job waits (:class:`ConflictError` if it is not pending)."""
        return self._get(f"{_PREFIX}/jobs/{_segment(job_id, 'job')}/why", _WHY)

    def logs(self, job_id: str, offset: int = 0) -> LogsOut:
        """A job's log from ``offset``."""
        return self._get(f"{_PREFIX}/jobs/{_segment(job_id, 'job')}/logs", _LOGS, offset=offset)

    def stats(self) -> StatsOut:
        """The cluster snapshot."""
        return self._get(f"{_PREFIX}/stats", _STATS)

    def gpu_report(self, month: str) -> dict[str, Any]:
        """The monthly GPU report (admin), as JSON."""
        return self._get(f"{_PREFIX}/reports/gpu", _ANY_MAP, month=month)

    def gpu_before_after(self, month: str, policy: str = "separate") -> dict[str, Any]:
        """Each team under the one queue and under ``policy``, the month replayed (admin)."""
        return self._get(f"{_PREFIX}/reports/gpu/compare", _ANY_MAP, month=month, policy=policy)

    def create_token(self, body: TokenCreate) -> TokenOut:
        """Mint a token (admin); keep the secret, it is shown once."""
        return self._post(f"{_PREFIX}/tokens", _TOKEN, body)

    def links(self) -> list[LinkOut]:
        """Every circuit: its state and both ends' measurements."""
        return self._get(f"{_PREFIX}/links", _LINKS)

    def routes(self, site: str | None = None) -> RouteTableOut:
        """The route table (of one site with ``site``)."""
        return self._get(f"{_PREFIX}/routes", _ROUTES, site=site)

    def fabric(self) -> FabricOut:
        """The fabric in force: version, YAML as applied, who applied it, drains."""
        return self._get(f"{_PREFIX}/fabric", _FABRIC)

    def apply_fabric(self, body: FabricApply) -> FabricApplyOut:
        """Put a fabric in force, or (``dry_run``) only see its diff and what it would
        strand (admin); :class:`ConflictError` for a change that would strand work."""
        return self._post(f"{_PREFIX}/fabric", _FABRIC_APPLIED, body)

    def drain(self, site: str, body: DrainIn) -> DrainOut:
        """Drain a site or one of its pools (admin)."""
        return self._post(f"{_PREFIX}/sites/{_segment(site, 'site')}/drain", _DRAIN, body)

    def undrain(self, site: str, body: UndrainIn) -> list[DrainOut]:
        """Lift a pool's drain or every drain at a site (admin); the drains lifted."""
        return self._post(f"{_PREFIX}/sites/{_segment(site, 'site')}/undrain", _DRAINS, body)

    def links_check(self, *, measured: bool = True) -> list[PairCheckOut]:
        """Every site pair's routes against the latency objectives."""
        return self._get(f"{_PREFIX}/links/check", _CHECKS, measured=str(measured).lower())

    def events(
        self, *, kind: str | None = None, after: int | None = None, limit: int = 100
    ) -> list[EventOut]:
        """Events oldest first (the newest ``limit``, or those after id ``after``)."""
        return self._get(f"{_PREFIX}/events", _EVENTS, kind=kind, after=after, limit=limit)

    def agent_sync(self, site: str, body: AgentSync) -> AgentSyncReply:
        """One agent sync of ``site`` (agent token of that site)."""
        return self._post(f"{_PREFIX}/agents/{_segment(site, 'site')}/sync", _SYNC_REPLY, body)

    # -- datasets and transfers -----------------------------------------------------------

    def add_dataset(self, body: DatasetAdd) -> ScanOut:
        """Register a directory at a site as a dataset (a new version of it); the queued
        scan (:class:`NotFoundError` for an unknown site)."""
        return self._post(f"{_PREFIX}/datasets", _SCAN, body)

    def datasets(self) -> list[DatasetOut]:
        """Every registered or declared dataset, with versions and replicas."""
        return self._get(f"{_PREFIX}/datasets", _DATASETS)

    def dataset(self, name: str) -> DatasetOut:
        """One dataset."""
        return self._get(f"{_PREFIX}/datasets/{_segment(name, 'dataset')}", _DATASET)

    def scan(self, scan_id: str) -> ScanOut:
        """One scan: its progress, and the version it found once done."""
        return self._get(f"{_PREFIX}/scans/{_segment(scan_id, 'scan')}", _SCAN)

    def push(self, body: PushIn) -> TransferOut:
        """Send a version to a site: a new transfer, the one already under way, or one
        already done when the site holds it all (:class:`ConflictError` when nothing holds
        it to send from)."""
        return self._post(f"{_PREFIX}/transfers", _TRANSFER, body)

    def transfers(self, *, state: str = "active", limit: int = 100) -> list[TransferOut]:
        """Transfers newest first: ``active`` ones, or ``all``."""
        return self._get(f"{_PREFIX}/transfers", _TRANSFERS, state=state, limit=limit)

    def transfer(self, transfer_id: str) -> TransferOut:
        """One transfer."""
        return self._get(f"{_PREFIX}/transfers/{_segment(transfer_id, 'transfer')}", _TRANSFER)

    def cancel_transfer(self, transfer_id: str) -> TransferOut:
        """Cancel a transfer (:class:`ConflictError` if it already ended)."""
        path = f"{_PREFIX}/transfers/{_segment(transfer_id, 'transfer')}/cancel"
        return self._post(path, _TRANSFER)

    # -- exports --------------------------------------------------------------------------

    def request_approval(self, body: ApprovalIn) -> ApprovalOut:
        """Ask for an export approval (compliance approves it)."""
        return self._post(f"{_PREFIX}/exports/approvals", _APPROVAL, body)

    def approvals(self, *, limit: int = 100) -> list[ApprovalOut]:
        """Approvals, newest first."""
        return self._get(f"{_PREFIX}/exports/approvals", _APPROVALS, limit=limit)

    def approval(self, approval_id: str) -> ApprovalOut:
        """One approval."""
        return self._get(
            f"{_PREFIX}/exports/approvals/{_segment(approval_id, 'approval')}", _APPROVAL
        )

    def approve(self, approval_id: str) -> ApprovalOut:
        """Approve a requested approval (a compliance token; never your own request)."""
        path = f"{_PREFIX}/exports/approvals/{_segment(approval_id, 'approval')}/approve"
        return self._post(path, _APPROVAL)

    def revoke(self, approval_id: str, body: RevokeIn) -> ApprovalOut:
        """Revoke an approval (a compliance token)."""
        path = f"{_PREFIX}/exports/approvals/{_segment(approval_id, 'approval')}/revoke"
        return self._post(path, _APPROVAL, body)

    def start_export(self, body: ExportIn) -> ExportOut:
        """Start an export under an approval (:class:`ForbiddenError`: refused)."""
        return self._post(f"{_PREFIX}/exports", _EXPORT, body)

    def exports(self, *, limit: int = 100) -> list[ExportOut]:
        """Exports, newest first."""
        return self._get(f"{_PREFIX}/exports", _EXPORTS, limit=limit)

    def export(self, export_id: str) -> ExportOut:
        """One export."""
        return self._get(f"{_PREFIX}/exports/{_segment(export_id, 'export')}", _EXPORT)

    def register_head(self) -> RegisterHeadOut:
        """The export register's signed head and public key."""
        return self._get(f"{_PREFIX}/register/head", _HEAD)

    def register_entries(self, *, first: int = 0, limit: int = 1000) -> RegisterEntriesOut:
        """Register entries from ``first``, as their canonical JSON texts."""
        return self._get(f"{_PREFIX}/register/entries", _ENTRIES, first=first, limit=limit)

    def register_proof(
        self, *, seq: int | None = None, size1: int | None = None, size: int | None = None
    ) -> RegisterProofOut:
        """An inclusion proof (``seq``) or a consistency proof (``size1``)."""
        return self._get(f"{_PREFIX}/register/proof", _PROOF, seq=seq, size1=size1, size=size)

    def register_bundle(self, month: str) -> RegisterBundleOut:
        """A month's register bundle, file name → text."""
        return self._get(f"{_PREFIX}/register/bundle", _BUNDLE, month=month)

    # -- lifetime -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the connection pool."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()


def _never_sent(exc: httpx.TransportError) -> bool:
    """Whether the request surely never reached the server: no connection was made."""
    return isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout | httpx.PoolTimeout)


def _reason(exc: httpx.TransportError) -> str:
    """What went wrong, in a few words and httpx's own."""
    if isinstance(exc, httpx.TimeoutException):
        what = "connect timeout" if _never_sent(exc) else "no answer in time"
    else:
        what = "cannot connect" if _never_sent(exc) else "connection lost"
    detail = str(exc) or type(exc).__name__
    return f"{what} ({detail})"


def _outcome_unknown(
    method: str,
    path: str,
    base: str,
    exc: httpx.TransportError,
    tries: Sequence[tuple[str, str]],
    *,
    several: bool,
) -> UnavailableError:
    """The error for a request that was sent to ``base`` and may or may not have been done."""
    elsewhere = ", so it was not sent to another server" if several else ""
    earlier = f"; before it: {describe_tries(tries)}" if tries else ""
    msg = (
        f"{method} {path} was sent to the onecluster server at {base}, which gave no answer "
        f"({_reason(exc)}); whether it was done is unknown{elsewhere}{earlier}"
    )
    hint = "check whether it was done (e.g. `onecluster jobs`) before trying again"
    return UnavailableError(msg, hint=hint)


def _segment(value: str, kind: str) -> str:
    """``value`` as one quoted path segment; dots too, so ``..`` is a name, not a step up."""
    if not value or "/" in value:
        # The server routes on the decoded path: such a value cannot name anything.
        msg = f"there is no {kind} {value!r}"
        raise NotFoundError(
            msg, hint=_WHERE_LISTED.get(kind, f"list {kind}s with `onecluster {kind}s`")
        )
    return quote(value, safe="").replace(".", "%2E")


#: Where the CLI lists the things whose ids are not ``onecluster <kind>s``.
_WHERE_LISTED = {
    "dataset": "list datasets with `onecluster dataset list`",
    "scan": "`onecluster dataset add` prints a scan's id",
    "approval": "list approvals with `onecluster export approvals`",
    "export": "list exports with `onecluster export list`",
}

_APPROVAL = TypeAdapter(ApprovalOut)
_APPROVALS = TypeAdapter(list[ApprovalOut])
_EXPORT = TypeAdapter(ExportOut)
_EXPORTS = TypeAdapter(list[ExportOut])
_HEAD = TypeAdapter(RegisterHeadOut)
_ENTRIES = TypeAdapter(RegisterEntriesOut)
_PROOF = TypeAdapter(RegisterProofOut)
_BUNDLE = TypeAdapter(RegisterBundleOut)
_STR_MAP = TypeAdapter(dict[str, str])
_ANY_MAP = TypeAdapter(dict[str, Any])
_SITES = TypeAdapter(list[SiteOut])
_FABRIC = TypeAdapter(FabricOut)
_FABRIC_APPLIED = TypeAdapter(FabricApplyOut)
_DRAIN = TypeAdapter(DrainOut)
_DRAINS = TypeAdapter(list[DrainOut])
_TEAMS = TypeAdapter(list[TeamOut])
_JOB = TypeAdapter(JobOut)
_JOBS = TypeAdapter(list[JobOut])
_LOGS = TypeAdapter(LogsOut)
_WHY = TypeAdapter(WhyOut)
_STATS = TypeAdapter(StatsOut)
_TOKEN = TypeAdapter(TokenOut)
_SYNC_REPLY = TypeAdapter(AgentSyncReply)
_LINKS = TypeAdapter(list[LinkOut])
_ROUTES = TypeAdapter(RouteTableOut)
_CHECKS = TypeAdapter(list[PairCheckOut])
_EVENTS = TypeAdapter(list[EventOut])
_LEADER = TypeAdapter(LeaderOut)
_SCAN = TypeAdapter(ScanOut)
_DATASET = TypeAdapter(DatasetOut)
_DATASETS = TypeAdapter(list[DatasetOut])
_TRANSFER = TypeAdapter(TransferOut)
_TRANSFERS = TypeAdapter(list[TransferOut])
