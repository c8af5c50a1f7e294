"""The Kubernetes backend: every attempt is a ``batch/v1`` Job of the site's cluster.

Driven with the official ``kubernetes`` client (an optional extra: ``pip install
'onecluster[kubernetes]'``), one kubeconfig context per site.  Manifests come from
:mod:`onecluster.backends._kube_manifest` and are validated against the client's models
before they are sent.  The backend keeps no files of its own state: every Job carries the
site's and the attempt's labels (the exact ids in annotations), so a restarted agent finds
its attempts by listing them.

``poll`` lists the site's Jobs and pods (two calls, at most once a second): a suspended Job
(Kueue has not admitted it) or a pod the scheduler cannot place is *queued* with the reason;
a running pod is running from its ``startTime``; a Complete Job exited 0, a Failed one with
its container's exit code; a Job that vanished without being stopped is *lost*.  ``stop``
deletes the Job (``gracePeriodSeconds`` = the grace: the kubelet SIGTERMs, then SIGKILLs);
the attempt is reported exited only once its pod is gone.  Capacity is the allocatable
``nvidia.com/gpu`` of Ready, schedulable nodes, by the GPU type their
``nvidia.com/gpu.product`` label names.  An API server that does not answer (or answers 5xx)
or refuses a Job (4xx) is the site's :meth:`problem`: the site is degraded.

Logs are the pod's log, fetched whole and kept in ``<work_dir>/attempts/<id>/output.log``;
byte offsets count from the start of that copy.
"""

from __future__ import annotations

import logging
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client import ApiException, V1Job

from onecluster.backends._kube_manifest import (
    ATTEMPT_LABEL,
    GPU_PRODUCT,
    GPU_RESOURCE,
    attempt_selector,
    job_manifest,
    job_name,
)
from onecluster.backends._logs import read_chunk
from onecluster.backends._protocol import AttemptSpec, AttemptStatus, LogSlice
from onecluster.errors import BackendError, ValidationError
from onecluster.model import AttemptState

__all__ = ["KubernetesBackend"]

_log = logging.getLogger("onecluster.backends.kubernetes")

_MIN_POLL_S = 1.0
_CAPACITY_TTL_S = 5.0
_REFUSED_FOR_S = 60.0
#: A Job not listed this soon after creation is not taken for lost (lists may lag).
_GRACE_UNLISTED_S = 10.0
_TIMEOUT_S = 5.0
_LOG = "output.log"


@dataclass(slots=True, kw_only=True)
class _Attempt:
    attempt_id: str
    job_id: str
    created_at: float
    stop_asked_at: float | None = None
    pod: str | None = None
    log_fetched_at: float = float("-inf")

    @property
    def name(self) -> str:
        """Its Job's name (derived from the attempt id, as the manifest names it)."""
        return job_name(self.attempt_id)


class KubernetesBackend:
    """A :class:`~onecluster.backends.ClusterBackend` on one Kubernetes cluster (namespace).

    ``api`` is a configured :class:`kubernetes.client.ApiClient` (see :meth:`connect`);
    ``gpu_types`` are the site's GPU types as the fabric names them.  Not thread-safe.
    """

    def __init__(
        self,
        site: str,
        *,
        api: client.ApiClient,
        gpu_types: Sequence[str],
        work_dir: Path,
        namespace: str = "default",
        image: str = "python:3.11-slim",
        queue: str | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        self._site = site
        self._batch = client.BatchV1Api(api)
        self._core = client.CoreV1Api(api)
        self._types = list(gpu_types)
        self._root = work_dir / "attempts"
        self._root.mkdir(parents=True, exist_ok=True)
        self._namespace = namespace
        self._image = image
        self._queue = queue
        self._environ = dict(environ or {})
        self._attempts: dict[str, _Attempt] = {}
        self._last: dict[str, AttemptStatus] = {}
        self._products: dict[str, set[str]] = {}
        self._capacity: dict[str, int] = {}
        self._capacity_at = float("-inf")
        self._polled_at = float("-inf")
        self._down: str | None = None
        self._refused: tuple[float, str] | None = None
        self._recover()

    @classmethod
    def connect(
        cls,
        site: str,
        *,
        gpu_types: Sequence[str],
        work_dir: Path,
        kubeconfig: Path | None = None,
        context: str | None = None,
        namespace: str = "default",
        image: str = "python:3.11-slim",
        queue: str | None = None,
    ) -> KubernetesBackend:
        """The backend on the cluster of ``context`` in ``kubeconfig`` (default
        ``~/.kube/config`` and its current context); :class:`ValidationError` if unusable."""
        try:
            api = config.new_client_from_config(  # type: ignore[no-untyped-call]
                config_file=str(kubeconfig) if kubeconfig else None, context=context
            )
        except (config.ConfigException, OSError) as exc:
            msg = f"cannot use the kubeconfig {kubeconfig or '~/.kube/config'}: {exc}"
            raise ValidationError(msg, hint="pass --kubeconfig and --kube-context") from exc
        return cls(
            site,
            api=api,
            gpu_types=gpu_types,
            work_dir=work_dir,
            namespace=namespace,
            image=image,
            queue=queue,
        )

    @property
    def name(self) -> str:
        """``kubernetes``."""
        return "kubernetes"

    # -- calls to the API server --------------------------------------------------------------

    def _call(self, what: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)``; a server that does not answer (or 5xx) marks the site down
        and raises :class:`BackendError`; 4xx is raised as :class:`ApiException`."""
        try:
            result = fn(*args, _request_timeout=_TIMEOUT_S, **kwargs)
        except ApiException as exc:
            if exc.status is not None and exc.status < 500:
                raise
            self._mark_down(f"{what}: HTTP {exc.status} {exc.reason}")
            raise BackendError(f"the Kubernetes API of site {self._site} fails: {what}") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:  # no answer, or a dead socket
            self._mark_down(f"{what}: {exc.__class__.__name__}")
            msg = f"the Kubernetes API of site {self._site} does not answer: {what}"
            raise BackendError(msg) from exc
        if self._down is not None:
            _log.warning("the Kubernetes API of site %s answers again", self._site)
            self._down = None
        return result

    def _mark_down(self, reason: str) -> None:
        if self._down is None:
            _log.warning("the Kubernetes API of site %s does not answer: %s", self._site, reason)
        self._down = reason

    def problem(self) -> str | None:
        """Why the cluster takes no work now: its API does not answer, or refused a Job."""
        if self._down is not None:
            return f"the Kubernetes API does not answer: {self._down}"
        if self._refused is not None and time.monotonic() - self._refused[0] < _REFUSED_FOR_S:
            return f"Kubernetes refused a job: {self._refused[1]}"
        return None

    # -- attempts -------------------------------------------------------------------------------

    def _recover(self) -> None:
        """Adopt the Jobs a previous agent of this site made (labels and annotations)."""
        try:
            jobs = self._call(
                "list jobs",
                self._batch.list_namespaced_job,
                self._namespace,
                label_selector=attempt_selector(self._site),
            )
        except BackendError:
            return  # polled again later; nothing is known until the API answers
        for job in jobs.items:
            notes = job.metadata.annotations or {}
            attempt_id = notes.get(ATTEMPT_LABEL)
            if not attempt_id:
                continue
            created = job.metadata.creation_timestamp
            self._attempts[attempt_id] = _Attempt(
                attempt_id=attempt_id,
                job_id=notes.get("onecluster.io/job-id", ""),
                created_at=created.timestamp() if created else time.time(),
            )
            self._last[attempt_id] = AttemptStatus(
                attempt_id=attempt_id,
                job_id=self._attempts[attempt_id].job_id,
                state=AttemptState.RUNNING,
            )

    def start(self, attempt: AttemptSpec) -> None:
        """Create the attempt's Job unless it is already known."""
        if attempt.attempt_id in self._attempts or attempt.attempt_id in self._last:
            return
        if attempt.gpu_type not in self._types:
            msg = f"site {self._site} has no {attempt.gpu_type} GPUs in its Kubernetes cluster"
            raise BackendError(msg)
        if self._down is not None:
            msg = f"the Kubernetes API of site {self._site} does not answer: {self._down}"
            raise BackendError(msg, hint="the attempt is created once it answers")
        self.capacity()
        products = sorted(self._products.get(attempt.gpu_type, set()))
        if not products:
            msg = f"no node of site {self._site} has {attempt.gpu_type} GPUs ({GPU_PRODUCT})"
            raise BackendError(msg)
        manifest = job_manifest(
            attempt,
            site=self._site,
            image=self._image,
            products=products,
            environ=self._environ,
            grace_s=30.0,
            queue=self._queue,
        )
        name = manifest["metadata"]["name"]
        try:
            self._call(
                "create a job",
                self._batch.create_namespaced_job,
                self._namespace,
                V1Job.model_validate(manifest),
            )
        except ApiException as exc:
            if exc.status != 409:  # 409: it exists already (an earlier try went through)
                self._refused = (time.monotonic(), f"HTTP {exc.status}: {exc.reason}")
                msg = f"Kubernetes of site {self._site} refused job {name}: {exc.reason}"
                raise BackendError(msg) from exc
        self._refused = None
        self._attempts[attempt.attempt_id] = _Attempt(
            attempt_id=attempt.attempt_id, job_id=attempt.job_id, created_at=time.time()
        )
        self._last[attempt.attempt_id] = AttemptStatus(
            attempt_id=attempt.attempt_id,
            job_id=attempt.job_id,
            state=AttemptState.RUNNING,
            queued=True,
        )
        _log.info("attempt %s is Job %s/%s", attempt.attempt_id, self._namespace, name)

    def stop(self, attempt_id: str, grace_s: float, reason: str) -> None:
        """Delete the attempt's Job: its pod gets SIGTERM, SIGKILL after ``grace_s``."""
        record = self._attempts.get(attempt_id)
        if record is None or record.stop_asked_at is not None:
            return
        record.stop_asked_at = time.time()
        status = self._last.get(attempt_id)
        grace = 0 if status is not None and status.started_at is None else round(grace_s)
        if not self._delete(record.name, grace, reason):
            record.stop_asked_at = None  # asked again on the next stop

    def _delete(self, name: str, grace_s: int, reason: str) -> bool:
        """Delete the Job ``name`` (and, in the background, its pod); whether the API took
        the request (a Job already gone counts as taken)."""
        options = client.V1DeleteOptions(
            grace_period_seconds=grace_s, propagation_policy="Background"
        )
        try:
            self._call(
                "delete a job",
                self._batch.delete_namespaced_job,
                name,
                self._namespace,
                body=options,
            )
        except ApiException as exc:
            if exc.status != 404:
                _log.warning("cannot delete Job %s (%s): %s", name, reason, exc.reason)
        except BackendError as exc:
            _log.warning("cannot delete Job %s (%s): %s", name, reason, exc.message)
            return False
        return True

    def poll(self) -> list[AttemptStatus]:
        """Every attempt's status from one list of Jobs and one of pods (the last known
        statuses while the API does not answer)."""
        if not self._attempts or time.monotonic() - self._polled_at < _MIN_POLL_S:
            return list(self._last.values())
        self._polled_at = time.monotonic()
        selector = attempt_selector(self._site)
        try:
            jobs = self._call(
                "list jobs",
                self._batch.list_namespaced_job,
                self._namespace,
                label_selector=selector,
            )
            pods = self._call(
                "list pods",
                self._core.list_namespaced_pod,
                self._namespace,
                label_selector=selector,
            )
        except (BackendError, ApiException):
            return list(self._last.values())
        by_name = {j.metadata.name: j for j in jobs.items}
        pods_of: dict[str, list[Any]] = {}
        for pod in pods.items:
            labels = pod.metadata.labels or {}
            pods_of.setdefault(labels.get("job-name", ""), []).append(pod)
        now = time.time()
        for attempt_id, record in list(self._attempts.items()):
            status = self._status(
                record, by_name.get(record.name), pods_of.get(record.name, []), now
            )
            before = self._last.get(attempt_id)
            if status.started_at is None and before is not None and before.started_at:
                status = replace(status, started_at=before.started_at)  # its pod is gone
            self._last[attempt_id] = status
            if status.state is not AttemptState.RUNNING:
                del self._attempts[attempt_id]
                self._save_log(record)
        return list(self._last.values())

    def _status(self, record: _Attempt, job: Any, pods: list[Any], now: float) -> AttemptStatus:
        pod = max(pods, key=lambda p: p.metadata.creation_timestamp or 0, default=None)
        if pod is not None:
            record.pod = pod.metadata.name
        started = _epoch(pod.status.start_time) if pod is not None and pod.status else None
        terminated = _terminated(pod)

        def status(state: AttemptState, **fields: Any) -> AttemptStatus:
            return AttemptStatus(
                attempt_id=record.attempt_id,
                job_id=record.job_id,
                state=state,
                started_at=started,
                **fields,
            )

        if record.stop_asked_at is not None:
            if job is None and pod is None:  # gone, as asked
                code = terminated[0] if terminated else 143
                return status(AttemptState.EXITED, exit_code=code, finished_at=now)
            return status(AttemptState.RUNNING)
        if job is None:
            if now - record.created_at < _GRACE_UNLISTED_S:
                return status(AttemptState.RUNNING, queued=True)
            return status(AttemptState.LOST)  # deleted by someone else
        conditions = {c.type: c for c in (job.status.conditions or [])} if job.status else {}
        if _true(conditions.get("Complete")):
            return status(AttemptState.EXITED, exit_code=0, finished_at=_end(terminated, now))
        if _true(conditions.get("Failed")):
            code = terminated[0] if terminated else 1
            if code == 0:
                code = 1
            return status(AttemptState.EXITED, exit_code=code, finished_at=_end(terminated, now))
        if job.spec is not None and job.spec.suspend:
            return status(
                AttemptState.RUNNING, queued=True, waiting_reason="waiting for Kueue admission"
            )
        if started is None:
            return status(AttemptState.RUNNING, queued=True, waiting_reason=_unscheduled(pod))
        return status(AttemptState.RUNNING)

    def read_logs(self, attempt_id: str, offset: int = 0, limit: int = 65536) -> LogSlice:
        """The pod's log (a copy kept once the attempt has ended)."""
        status = self._last.get(attempt_id)
        final = status is not None and status.state is not AttemptState.RUNNING
        record = self._attempts.get(attempt_id)
        # the agent reads every sync: fetch a running pod's log at most once a second
        if record is not None and time.monotonic() - record.log_fetched_at >= _MIN_POLL_S:
            self._save_log(record)
        data, next_offset = read_chunk(self._root / attempt_id / _LOG, offset, limit, final=final)
        return LogSlice(attempt_id=attempt_id, offset=offset, next_offset=next_offset, data=data)

    def _save_log(self, record: _Attempt) -> None:
        """Copy the pod's whole log under the work dir (kept when the pod is gone)."""
        if record.pod is None:
            return
        record.log_fetched_at = time.monotonic()
        try:
            response = self._call(
                "read a log",
                self._core.read_namespaced_pod_log,
                record.pod,
                self._namespace,
                _preload_content=False,
            )
        except (BackendError, ApiException):
            return  # the pod is gone or not started: keep the copy there is
        data: bytes = response.data
        path = self._root / record.attempt_id
        path.mkdir(parents=True, exist_ok=True)
        (path / _LOG).write_bytes(data)

    def forget(self, attempt_id: str) -> None:
        """Drop a finished attempt, its log copy and its finished Job object."""
        status = self._last.get(attempt_id)
        if status is None or status.state is AttemptState.RUNNING:
            return
        del self._last[attempt_id]
        shutil.rmtree(self._root / attempt_id, ignore_errors=True)
        # the finished Job object too, so that a restarted agent does not adopt it again
        self._delete(job_name(attempt_id), 0, "forgotten")

    def capacity(self) -> Mapping[str, int]:
        """GPUs per fabric type on Ready, schedulable nodes (the last known while the API
        does not answer)."""
        now = time.monotonic()
        if now - self._capacity_at < _CAPACITY_TTL_S:
            return dict(self._capacity)
        try:
            nodes = self._call("list nodes", self._core.list_node)
        except (BackendError, ApiException):
            return dict(self._capacity)
        capacity: dict[str, int] = {}
        products: dict[str, set[str]] = {}
        for node in nodes.items:
            product = (node.metadata.labels or {}).get(GPU_PRODUCT, "")
            gpu_type = _type_of(product, self._types)
            if gpu_type is None:
                continue
            products.setdefault(gpu_type, set()).add(product)
            ready = any(
                c.type == "Ready" and c.status == "True" for c in (node.status.conditions or [])
            )
            if not ready or (node.spec is not None and node.spec.unschedulable):
                continue
            count = int((node.status.allocatable or {}).get(GPU_RESOURCE, "0"))
            capacity[gpu_type] = capacity.get(gpu_type, 0) + count
        self._capacity, self._products, self._capacity_at = capacity, products, now
        return dict(capacity)

    def close(self, grace_s: float = 5.0) -> None:
        """Stop every attempt still running (their Jobs are deleted with ``grace_s``)."""
        for attempt_id in list(self._attempts):
            self.stop(attempt_id, grace_s, "the agent stops")


def _type_of(product: str, types: Sequence[str]) -> str | None:
    """The fabric GPU type whose name is in the node's product label (longest name first:
    ``H100`` is not ``H10``)."""
    words = product.upper().replace("_", "-").split("-")
    for gpu_type in sorted(types, key=len, reverse=True):
        if gpu_type.upper() in words:
            return gpu_type
    return None


def _epoch(stamp: datetime | None) -> float | None:
    return stamp.timestamp() if stamp is not None else None


def _true(condition: Any) -> bool:
    return condition is not None and condition.status == "True"


def _terminated(pod: Any) -> tuple[int, float | None] | None:
    """The container's exit code and end, once it has terminated."""
    if pod is None or pod.status is None:
        return None
    for container in pod.status.container_statuses or []:
        done = container.state.terminated if container.state else None
        if done is not None:
            return int(done.exit_code), _epoch(done.finished_at)
    return None


def _end(terminated: tuple[int, float | None] | None, now: float) -> float:
    return terminated[1] if terminated and terminated[1] is not None else now


def _unscheduled(pod: Any) -> str | None:
    """Why the scheduler has not placed the pod (its PodScheduled condition), if it says."""
    if pod is None or pod.status is None:
        return None
    for condition in pod.status.conditions or []:
        if condition.type == "PodScheduled" and condition.status == "False":
            return str(condition.message or condition.reason)
    return None
