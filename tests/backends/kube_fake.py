"""A fake of the Kubernetes API server's HTTP interface — the resources the Kubernetes backend
uses, no more: nodes (list), batch/v1 Jobs (create, list, get, delete, patch ``suspend``), pods
(list, log).  It is a fake, named as one: no API server can run on this machine.

What it keeps faithful: the paths, verbs and JSON shapes of the real API (``kind``/``items``
lists, ``Status`` error bodies with 404/409/422 codes), equality label selectors, validation
of every Job received against the official client's models (422 when it fails), and a small
scheduler and kubelet: a Job that is not suspended gets one pod; the pod binds to a Ready node
whose ``nvidia.com/gpu.product`` matches its node affinity and has the free ``nvidia.com/gpu``
it asks for, else it stays Pending/Unschedulable; a bound pod's container command runs as a
real local process (its output is the pod log); its exit ends the pod (Succeeded/Failed with
the exit code) and the Job (Complete/Failed conditions).  Deleting a Job SIGTERMs its pod's
process and SIGKILLs it after the grace period; the Job and pod are gone once it has exited.
Every manifest received is kept in :attr:`FakeKubeApi.received`; :meth:`FakeKubeApi.pause`
makes every request fail with 503 (an API server that is down behind its load balancer).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from kubernetes.client import V1Job
from pydantic import ValidationError as ModelError

__all__ = ["FakeKubeApi", "FakeNode"]


@dataclass(slots=True)
class FakeNode:
    name: str
    product: str
    gpus: int
    ready: bool = True


@dataclass(slots=True)
class _Pod:
    name: str
    namespace: str
    job: str
    labels: dict[str, str]
    gpus: int
    products: list[str]
    command: list[str]
    env: dict[str, str]
    grace_s: int
    created: float
    node: str | None = None
    phase: str = "Pending"
    reason: str | None = None
    message: str | None = None
    started: float | None = None
    finished: float | None = None
    exit_code: int | None = None
    process: subprocess.Popen[bytes] | None = None
    log: Path | None = None
    kill_at: float | None = None
    deleting: bool = False


@dataclass(slots=True)
class _Job:
    manifest: dict[str, Any]
    created: float
    pod: str | None = None
    deleting: bool = False
    conditions: list[dict[str, str]] = field(default_factory=list)


def _stamp(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _matches(labels: dict[str, str], selector: str | None) -> bool:
    if not selector:
        return True
    for term in selector.split(","):
        key, _, value = term.partition("=")
        if labels.get(key.strip()) != value.strip():
            return False
    return True


class FakeKubeApi:
    """The fake API server on ``127.0.0.1`` (``url``); :meth:`close` ends it and its pods."""

    def __init__(self, nodes: list[FakeNode], work_dir: Path) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.work_dir = work_dir
        self.received: list[dict[str, Any]] = []
        self.requests: list[tuple[str, str]] = []
        self._jobs: dict[tuple[str, str], _Job] = {}
        self._pods: dict[tuple[str, str], _Pod] = {}
        self._lock = threading.RLock()
        self._paused = False
        self._closed = threading.Event()
        handler = self._handler()
        self._http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self._http.server_address[1]}"
        self._threads = [
            threading.Thread(target=self._http.serve_forever, daemon=True),
            threading.Thread(target=self._run, daemon=True),
        ]
        for thread in self._threads:
            thread.start()

    # -- test controls --------------------------------------------------------------------

    def pause(self, paused: bool = True) -> None:
        """While paused every request gets 503 (the pods go on running)."""
        self._paused = paused

    def admit(self, namespace: str, name: str) -> None:
        """What Kueue does on admission: unsuspend the Job."""
        with self._lock:
            self._jobs[(namespace, name)].manifest["spec"]["suspend"] = False

    def wait_gone(self, namespace: str, name: str, timeout: float = 20.0) -> None:
        """Until the Job ``name`` and its pod are deleted."""
        deadline = time.monotonic() + timeout
        while (namespace, name) in self._jobs:
            if time.monotonic() > deadline:
                msg = f"job {name} still there"
                raise TimeoutError(msg)
            time.sleep(0.05)

    def logs(self) -> list[str]:
        """The log files of every pod that ran, oldest first (names under ``work_dir``)."""
        return sorted(p.name for p in self.work_dir.glob("*.log"))

    def kubeconfig(self, path: Path, context: str = "fake") -> Path:
        """A kubeconfig file with one context that points at this fake."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": context, "cluster": {"server": self.url}}],
            "users": [{"name": context, "user": {"token": "fake-token"}}],
            "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
            "current-context": context,
        }
        path.write_text(json.dumps(config))
        return path

    def close(self) -> None:
        self._closed.set()
        self._http.shutdown()
        self._http.server_close()
        with self._lock:
            for pod in self._pods.values():
                if pod.process is not None and pod.process.poll() is None:
                    os.killpg(pod.process.pid, signal.SIGKILL)
                    pod.process.wait()

    # -- the scheduler and kubelet ----------------------------------------------------------

    def _run(self) -> None:
        while not self._closed.wait(0.05):
            with self._lock:
                self._step()

    def _free(self, node: FakeNode) -> int:
        used = sum(
            p.gpus for p in self._pods.values() if p.node == node.name and p.finished is None
        )
        return node.gpus - used

    def _step(self) -> None:
        now = time.time()
        for key, job in list(self._jobs.items()):
            spec = job.manifest["spec"]
            if job.pod is None and not spec.get("suspend") and not job.deleting:
                job.pod = self._make_pod(key[0], key[1], job, now)
        for key, pod in list(self._pods.items()):
            if pod.node is None and not pod.deleting:
                self._bind(pod, now)
            if pod.process is not None and pod.finished is None:
                code = pod.process.poll()
                if code is None and pod.kill_at is not None and now >= pod.kill_at:
                    os.killpg(pod.process.pid, signal.SIGKILL)
                elif code is not None:
                    pod.finished, pod.exit_code = now, 128 - code if code < 0 else code
                    pod.phase = "Succeeded" if pod.exit_code == 0 else "Failed"
                    self._finish_job(pod, now)
            if pod.deleting and (pod.process is None or pod.finished is not None):
                del self._pods[key]
        for key, job in list(self._jobs.items()):
            if job.deleting and (job.pod is None or (key[0], job.pod) not in self._pods):
                del self._jobs[key]

    def _make_pod(self, namespace: str, job_name: str, job: _Job, now: float) -> str:
        template = job.manifest["spec"]["template"]
        pod_spec = template["spec"]
        container = pod_spec["containers"][0]
        limits = container.get("resources", {}).get("limits", {})
        terms = (
            pod_spec.get("affinity", {})
            .get("nodeAffinity", {})
            .get("requiredDuringSchedulingIgnoredDuringExecution", {})
            .get("nodeSelectorTerms", [])
        )
        products = [
            v
            for t in terms
            for e in t.get("matchExpressions", [])
            if e["key"] == "nvidia.com/gpu.product"
            for v in e.get("values", [])
        ]
        name = f"{job_name}-{len(self._pods):05d}"
        self._pods[(namespace, name)] = _Pod(
            name=name,
            namespace=namespace,
            job=job_name,
            labels={**template.get("metadata", {}).get("labels", {}), "job-name": job_name},
            gpus=int(limits.get("nvidia.com/gpu", "0")),
            products=products,
            command=list(container.get("command", [])) + list(container.get("args", [])),
            env={e["name"]: e.get("value", "") for e in container.get("env", [])},
            grace_s=int(pod_spec.get("terminationGracePeriodSeconds", 30)),
            created=now,
        )
        return name

    def _bind(self, pod: _Pod, now: float) -> None:
        fits = [
            n
            for n in self.nodes.values()
            if n.ready
            and (not pod.products or n.product in pod.products)
            and self._free(n) >= pod.gpus
        ]
        if not fits:
            pod.reason = "Unschedulable"
            pod.message = (
                f"0/{len(self.nodes)} nodes are available: "
                f"insufficient nvidia.com/gpu or no node of {', '.join(pod.products)}"
            )
            return
        node = fits[0]
        first = node.gpus - self._free(node)
        pod.node, pod.reason, pod.message = node.name, None, None
        pod.log = self.work_dir / f"{pod.namespace}-{pod.name}.log"
        env = {
            **pod.env,
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "NVIDIA_VISIBLE_DEVICES": ",".join(str(first + i) for i in range(pod.gpus)),
            "HOSTNAME": pod.name,
        }
        with pod.log.open("wb") as out:
            try:
                pod.process = subprocess.Popen(
                    pod.command,
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:  # the container cannot start: as a runtime reports it
                out.write(f"{exc}\n".encode())
                pod.finished, pod.exit_code, pod.phase = now, 128, "Failed"
                pod.started = now
                self._finish_job(pod, now)
                return
        pod.phase, pod.started = "Running", now

    def _finish_job(self, pod: _Pod, now: float) -> None:
        job = self._jobs.get((pod.namespace, pod.job))
        if job is None or job.deleting:
            return
        if pod.phase == "Succeeded":
            job.conditions = [{"type": "Complete", "status": "True"}]
        else:
            job.conditions = [
                {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
            ]

    # -- JSON of the objects ----------------------------------------------------------------

    def _job_json(self, namespace: str, name: str, job: _Job) -> dict[str, Any]:
        pod = self._pods.get((namespace, job.pod)) if job.pod else None
        manifest = json.loads(json.dumps(job.manifest))
        manifest["metadata"].update(
            namespace=namespace,
            uid=f"uid-{namespace}-{name}",
            creationTimestamp=_stamp(job.created),
        )
        status: dict[str, Any] = {}
        if pod is not None and pod.started is not None:
            status["startTime"] = _stamp(pod.started)
            if pod.finished is None:
                status["active"] = 1
            elif pod.phase == "Succeeded":
                status["succeeded"] = 1
                status["completionTime"] = _stamp(pod.finished)
            else:
                status["failed"] = 1
        if job.conditions:
            status["conditions"] = job.conditions
        manifest["status"] = status
        return manifest

    def _pod_json(self, pod: _Pod) -> dict[str, Any]:
        status: dict[str, Any] = {"phase": pod.phase}
        if pod.reason is not None:
            status["conditions"] = [
                {
                    "type": "PodScheduled",
                    "status": "False",
                    "reason": pod.reason,
                    "message": pod.message,
                }
            ]
        if pod.started is not None:
            status["startTime"] = _stamp(pod.started)
            state: dict[str, Any]
            if pod.finished is None:
                state = {"running": {"startedAt": _stamp(pod.started)}}
            else:
                state = {
                    "terminated": {
                        "exitCode": pod.exit_code,
                        "startedAt": _stamp(pod.started),
                        "finishedAt": _stamp(pod.finished),
                        "reason": "Completed" if pod.exit_code == 0 else "Error",
                    }
                }
            status["containerStatuses"] = [
                {
                    "name": "attempt",
                    "image": "fake",
                    "imageID": "fake",
                    "ready": pod.finished is None,
                    "restartCount": 0,
                    "state": state,
                }
            ]
        meta: dict[str, Any] = {
            "name": pod.name,
            "namespace": pod.namespace,
            "labels": pod.labels,
            "creationTimestamp": _stamp(pod.created),
        }
        if pod.deleting:
            meta["deletionTimestamp"] = _stamp(time.time())
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": meta,
            "spec": {
                "nodeName": pod.node,
                "containers": [{"name": "attempt", "image": "fake"}],
            },
            "status": status,
        }

    def _node_json(self, node: FakeNode) -> dict[str, Any]:
        gpus = str(node.gpus)
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": node.name,
                "labels": {"nvidia.com/gpu.product": node.product},
            },
            "spec": {},
            "status": {
                "allocatable": {"nvidia.com/gpu": gpus, "cpu": "64"},
                "capacity": {"nvidia.com/gpu": gpus, "cpu": "64"},
                "conditions": [{"type": "Ready", "status": "True" if node.ready else "False"}],
            },
        }

    # -- HTTP ---------------------------------------------------------------------------------

    def _handle(self, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
        parts = [p for p in path.split("/") if p]
        selector = query.get("labelSelector")
        with self._lock:
            if parts == ["api", "v1", "nodes"] and method == "GET":
                items = [self._node_json(n) for n in self.nodes.values()]
                return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": items}
            if parts[:3] == ["apis", "batch", "v1"] and parts[3:4] == ["namespaces"]:
                return self._jobs_api(method, parts[4], parts[6:], selector, body)
            if parts[:3] == ["api", "v1", "namespaces"] and parts[4:5] == ["pods"]:
                return self._pods_api(method, parts[3], parts[5:], selector)
        return _status(404, "NotFound", f"the server could not find the requested resource {path}")

    def _jobs_api(
        self, method: str, ns: str, rest: list[str], selector: str | None, body: Any
    ) -> tuple[int, Any]:
        if not rest and method == "GET":
            items = [
                self._job_json(ns, name, job)
                for (n, name), job in sorted(self._jobs.items())
                if n == ns and _matches(job.manifest["metadata"].get("labels", {}), selector)
            ]
            return 200, {
                "apiVersion": "batch/v1",
                "kind": "JobList",
                "metadata": {},
                "items": items,
            }
        if not rest and method == "POST":
            self.received.append(body)
            try:
                V1Job.model_validate(body)
            except ModelError as exc:
                return _status(422, "Invalid", f"Job is invalid: {exc}")
            name = body["metadata"]["name"]
            if (ns, name) in self._jobs:
                return _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
            self._jobs[(ns, name)] = _Job(
                manifest=json.loads(json.dumps(body)), created=time.time()
            )
            return 201, self._job_json(ns, name, self._jobs[(ns, name)])
        name = rest[0]
        job = self._jobs.get((ns, name))
        if job is None or (job.deleting and method != "GET"):
            return _status(404, "NotFound", f'jobs.batch "{name}" not found')
        if method == "GET":
            return 200, self._job_json(ns, name, job)
        if method == "PATCH":
            if set(body) - {"spec"} or set(body.get("spec", {})) - {"suspend"}:
                return _status(422, "Invalid", "this fake patches spec.suspend only")
            job.manifest["spec"]["suspend"] = bool(body["spec"]["suspend"])
            return 200, self._job_json(ns, name, job)
        if method == "DELETE":
            options = body or {}
            job.deleting = True
            pod = self._pods.get((ns, job.pod)) if job.pod else None
            if pod is not None:
                grace = options.get("gracePeriodSeconds", pod.grace_s)
                pod.deleting = True
                if pod.process is not None and pod.finished is None:
                    os.killpg(pod.process.pid, signal.SIGTERM)
                    pod.kill_at = time.time() + float(grace)
            return 200, {"kind": "Status", "apiVersion": "v1", "status": "Success"}
        return _status(405, "MethodNotAllowed", f"{method} is not supported here")

    def _pods_api(
        self, method: str, ns: str, rest: list[str], selector: str | None
    ) -> tuple[int, Any]:
        if not rest and method == "GET":
            items = [
                self._pod_json(p)
                for (n, _), p in sorted(self._pods.items())
                if n == ns and _matches(p.labels, selector)
            ]
            return 200, {"apiVersion": "v1", "kind": "PodList", "metadata": {}, "items": items}
        pod = self._pods.get((ns, rest[0]))
        if pod is None:
            return _status(404, "NotFound", f'pods "{rest[0]}" not found')
        if rest[1:] == ["log"] and method == "GET":
            if pod.log is None:
                return _status(
                    400,
                    "BadRequest",
                    f'container "attempt" in pod "{pod.name}" is waiting to start',
                )
            return 200, pod.log.read_bytes()
        return _status(405, "MethodNotAllowed", f"{method} is not supported here")

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return

            def _serve(self) -> None:
                url = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                fake.requests.append((self.command, url.path))
                if fake._paused:
                    code, body = _status(503, "ServiceUnavailable", "the server is unavailable")
                else:
                    try:
                        payload = json.loads(raw) if raw else None
                    except ValueError:
                        code, body = _status(400, "BadRequest", "the body is not JSON")
                    else:
                        code, body = fake._handle(self.command, url.path, query, payload)
                data = body if isinstance(body, bytes) else json.dumps(body).encode()
                self.send_response(code)
                kind = "text/plain" if isinstance(body, bytes) else "application/json"
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_DELETE = do_PATCH = _serve

        return Handler


def _status(code: int, reason: str, message: str) -> tuple[int, dict[str, Any]]:
    return code, {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
