"""Job manifests of the Kubernetes backend, checked against the official client's models."""

from __future__ import annotations

import re

import pytest

from onecluster.backends import AttemptSpec
from onecluster.backends._kube_manifest import job_manifest, job_name, label_value, validate_job
from onecluster.errors import ValidationError

pytest.importorskip("kubernetes")

DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def spec(attempt_id: str = "j-661b57e20562bf4c0fb.1.0", gpus: int = 4) -> AttemptSpec:
    return AttemptSpec(
        attempt_id=attempt_id,
        job_id=attempt_id.split(".", maxsplit=1)[0],
        command=("python", "train.py", "--epochs", "3"),
        gpu_type="H100",
        gpus=gpus,
        env={"EXTRA": "1"},
    )


def manifest(**fields: object) -> dict[str, object]:
    base: dict[str, object] = {
        "site": "singapore",
        "image": "python:3.11-slim",
        "products": ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL"],
        "environ": {"PATH": "/usr/bin"},
        "grace_s": 10.0,
    }
    return job_manifest(spec(), **{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "attempt_id", ["j-1.1.0", "A:B_c.9.12", "x" * 128, "j-661b57e20562bf4c0fb.1.0"]
)
def test_job_names_are_dns_labels_unique_per_attempt(attempt_id: str) -> None:
    name = job_name(attempt_id)
    assert DNS_LABEL.match(name) and len(name) <= 63, name
    assert job_name(attempt_id + "x") != name
    value = label_value(attempt_id)
    assert len(value) <= 63 and re.match(r"^[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$", value)


def test_a_job_asks_for_its_gpus_on_nodes_of_its_type_and_never_retries() -> None:
    job = manifest()
    spec_ = job["spec"]
    assert isinstance(spec_, dict)
    assert spec_["backoffLimit"] == 0 and spec_["suspend"] is False
    pod = spec_["template"]["spec"]
    assert pod["restartPolicy"] == "Never" and pod["terminationGracePeriodSeconds"] == 10
    [container] = pod["containers"]
    assert container["command"] == ["python", "train.py", "--epochs", "3"]
    assert container["resources"]["limits"] == {"nvidia.com/gpu": "4"}
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["EXTRA"] == "1" and env["ONECLUSTER_SITE"] == "singapore"
    [term] = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"][0]["values"] == ["NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-NVL"]
    labels = job["metadata"]["labels"]  # type: ignore[index]
    assert labels["onecluster.io/attempt-id"] == "j-661b57e20562bf4c0fb.1.0"


def test_with_a_kueue_queue_the_job_starts_suspended_in_it() -> None:
    job = manifest(queue="team-llm")
    assert job["spec"]["suspend"] is True  # type: ignore[index]
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-llm"  # type: ignore[index]


@pytest.mark.parametrize(
    ("path", "value", "match"),
    [
        (("spec", "template", "spec", "containers", 0, "name"), None, "name"),
        (("spec", "template", "spec", "restartPolicyy"), "Never", "restartPolicyy"),
        (("spec", "backoffLimit"), "zero", "backoffLimit"),
    ],
)
def test_a_manifest_the_models_reject_is_refused(
    path: tuple[object, ...], value: object, match: str
) -> None:
    job = manifest()
    node: object = job
    for key in path[:-1]:
        node = node[key]  # type: ignore[index]
    if value is None:
        del node[path[-1]]  # type: ignore[attr-defined]
    else:
        node[path[-1]] = value  # type: ignore[index]
    with pytest.raises(ValidationError, match=match):
        validate_job(job)
