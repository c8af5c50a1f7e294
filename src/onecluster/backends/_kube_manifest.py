"""The Kubernetes objects of one attempt: a ``batch/v1`` Job, built as plain JSON and checked
against the official client's OpenAPI models before it is sent.

Names are DNS-1123 labels (``oc-<attempt, sanitised>-<hash>``, at most 63 characters); the
labels tie the Job and its pod to onecluster (``app.kubernetes.io/managed-by``,
``onecluster.io/site``, ``onecluster.io/job-id``, ``onecluster.io/attempt-id`` — sanitised
label values; the exact ids are annotations).  GPUs are ``nvidia.com/gpu`` limits, the GPU
type a node affinity on ``nvidia.com/gpu.product`` (the NVIDIA GPU feature discovery label)
for the products that name it.  ``backoffLimit: 0`` and ``restartPolicy: Never``: onecluster
requeues lost work itself, so a pod never runs twice.  With a Kueue queue the Job carries
``kueue.x-k8s.io/queue-name`` and starts ``suspend: true``; Kueue unsuspends it on admission.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from onecluster.backends._protocol import AttemptSpec
from onecluster.errors import ValidationError

__all__ = [
    "ATTEMPT_LABEL",
    "MANAGED_BY",
    "attempt_selector",
    "job_manifest",
    "job_name",
    "label_value",
    "validate_job",
]

MANAGED_BY = "onecluster"
ATTEMPT_LABEL = "onecluster.io/attempt-id"
SITE_LABEL = "onecluster.io/site"
JOB_LABEL = "onecluster.io/job-id"
GPU_RESOURCE = "nvidia.com/gpu"
GPU_PRODUCT = "nvidia.com/gpu.product"
KUEUE_QUEUE = "kueue.x-k8s.io/queue-name"
_UNSAFE = re.compile(r"[^a-z0-9-]+")


def job_name(attempt_id: str) -> str:
    """A DNS-1123 label unique per attempt: readable prefix, then a hash of the exact id."""
    digest = hashlib.sha256(attempt_id.encode()).hexdigest()[:10]
    readable = _UNSAFE.sub("-", attempt_id.lower()).strip("-")[: 63 - len("oc--") - 10]
    return f"oc-{readable.rstrip('-')}-{digest}"


def label_value(value: str) -> str:
    """``value`` as a valid label value (≤ 63 of ``[A-Za-z0-9._-]``, alphanumeric ends)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", value)[:63]
    return safe.strip("._-") or "x"


def attempt_selector(site: str) -> str:
    """The label selector of every object this site's backend made."""
    return f"app.kubernetes.io/managed-by={MANAGED_BY},{SITE_LABEL}={label_value(site)}"


def job_manifest(
    attempt: AttemptSpec,
    *,
    site: str,
    image: str,
    products: Sequence[str],
    environ: Mapping[str, str],
    grace_s: float,
    queue: str | None = None,
) -> dict[str, Any]:
    """The ``batch/v1`` Job that runs ``attempt``; ``products`` are the node label values of
    ``nvidia.com/gpu.product`` that count as its GPU type."""
    labels = {
        "app.kubernetes.io/managed-by": MANAGED_BY,
        SITE_LABEL: label_value(site),
        JOB_LABEL: label_value(attempt.job_id),
        ATTEMPT_LABEL: label_value(attempt.attempt_id),
    }
    job_labels = dict(labels)
    if queue is not None:
        job_labels[KUEUE_QUEUE] = queue
    env = {
        **environ,
        **attempt.env,
        "ONECLUSTER_JOB_ID": attempt.job_id,
        "ONECLUSTER_ATTEMPT_ID": attempt.attempt_id,
        "ONECLUSTER_SITE": site,
    }
    gpus = str(attempt.gpus)
    manifest: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": job_name(attempt.attempt_id),
            "labels": job_labels,
            "annotations": {
                "onecluster.io/attempt-id": attempt.attempt_id,
                "onecluster.io/job-id": attempt.job_id,
                "onecluster.io/gpu-type": attempt.gpu_type,
            },
        },
        "spec": {
            "backoffLimit": 0,
            "suspend": queue is not None,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "terminationGracePeriodSeconds": max(0, round(grace_s)),
                    "containers": [
                        {
                            "name": "attempt",
                            "image": image,
                            "command": list(attempt.command),
                            **({"workingDir": attempt.workdir} if attempt.workdir else {}),
                            "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
                            "resources": {
                                "limits": {GPU_RESOURCE: gpus},
                                "requests": {GPU_RESOURCE: gpus},
                            },
                        }
                    ],
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [
                                    {
                                        "matchExpressions": [
                                            {
                                                "key": GPU_PRODUCT,
                                                "operator": "In",
                                                "values": sorted(products),
                                            }
                                        ]
                                    }
                                ]
                            }
                        }
                    },
                },
            },
        },
    }
    validate_job(manifest)
    return manifest


def validate_job(manifest: Mapping[str, Any]) -> None:
    """:class:`ValidationError` unless ``manifest`` is a ``batch/v1`` Job the official
    client's OpenAPI models accept (every field known, required ones present, types right)."""
    from kubernetes.client import V1Job  # noqa: PLC0415  (an optional extra)
    from pydantic import ValidationError as ModelError  # noqa: PLC0415

    if manifest.get("apiVersion") != "batch/v1" or manifest.get("kind") != "Job":
        msg = "a Job manifest must be apiVersion batch/v1, kind Job"
        raise ValidationError(msg)
    try:
        V1Job.model_validate(manifest)
    except ModelError as exc:
        msg = f"the Job manifest does not validate against the Kubernetes models: {exc}"
        raise ValidationError(msg) from exc
