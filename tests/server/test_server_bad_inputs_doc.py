"""``docs/bad-inputs.md`` stays true: every REST row of its table is replayed against a real
server, and the status, code and start of the message must be what the page says."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
import pytest

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = pytest.mark.integration

PAGE = Path(__file__).resolve().parents[2] / "docs" / "bad-inputs.md"
JOB: dict[str, Any] = {"team": "llm", "gpus": 8, "duration_s": 60, "command": ["true"]}
SYNC = "/agents/tokyo/sync"
DATASET: dict[str, Any] = {"name": "corpus", "site": "tokyo", "path": "/data/corpus"}
PUSH: dict[str, Any] = {"dataset": "speech-ja-10k", "to": "singapore"}
SCAN: dict[str, Any] = {"id": "s-1", "state": "done"}
REPLICA: dict[str, Any] = {
    "dataset": "Corpus",
    "root": "a" * 64,
    "state": "complete",
    "bytes_present": 1,
    "path": "/d",
}
TRANSFER: dict[str, Any] = {"id": "t-1", "state": "done", "rate_bps": -1}


def _data(data: dict[str, Any]) -> dict[str, Any]:
    return {"agent_id": "a", "data": data}


def _streamed() -> Iterator[bytes]:
    yield b'{"team": "llm", "command": ["'
    for _ in range(48):
        yield b"x" * 65_536
    yield b'"]}'


@dataclass(frozen=True)
class Case:
    """One bad request: ``id`` is the first cell of its row in the page."""

    id: str
    method: str
    path: str
    role: str = "admin"
    json: Any = None
    params: dict[str, Any] = field(default_factory=dict)
    content: bytes | Callable[[], Iterator[bytes]] | None = None
    headers: dict[str, str] = field(default_factory=dict)


CASES = (
    Case("R1", "POST", "/jobs", json={k: v for k, v in JOB.items() if k != "command"}),
    Case("R2", "POST", "/jobs", json=JOB | {"command": []}),
    Case("R3", "POST", "/jobs", json=JOB | {"command": [""]}),
    Case("R4", "POST", "/jobs", json=JOB | {"command": ["x" * 10_000_000]}),
    Case("R5", "POST", "/jobs", json=JOB | {"name": "x" * 10_000_000}),
    Case("R6", "POST", "/jobs", content=_streamed, headers={"Content-Type": "application/json"}),
    Case("R7", "POST", "/jobs", json=JOB | {"command": ["x" * 200_000]}),
    Case("R8", "POST", "/jobs", json=JOB | {"command": ["x" * 9000, "y" * 9000]}),
    Case("R9", "POST", "/jobs", json=JOB | {"command": ["sh", "-c", "a\x00b"]}),
    Case("R10", "POST", "/jobs", json=JOB | {"name": "x" * 200}),
    Case("R11", "POST", "/jobs", json=JOB | {"name": "report\u202etxt.exe"}),
    Case("R12", "POST", "/jobs", json=JOB | {"name": "two\nlines"}),
    Case("R13", "POST", "/jobs", json=JOB | {"team": "llm\u2066"}),
    Case("R14", "POST", "/jobs", json=JOB | {"dataset": "nosuch-ds"}),
    Case("R15", "POST", "/jobs", json=JOB | {"duration_s": 1e308}),
    Case("R16", "POST", "/jobs", json=JOB | {"duration_s": -1}),
    Case("R17", "POST", "/jobs", json=JOB | {"duration_s": "60"}),
    Case("R18", "POST", "/jobs", json=JOB | {"gpus": "8"}),
    Case("R19", "POST", "/jobs", json=JOB | {"gpus": 8.5}),
    Case("R20", "POST", "/jobs", json=JOB | {"gpus": 10_000_000}),
    Case("R21", "POST", "/jobs", json=JOB | {"gpus": 0}),
    Case("R22", "POST", "/jobs", json=JOB | {"gpus": 10_000}),
    Case("R23", "POST", "/jobs", json=JOB | {"gpu_types": ["TPUv9"]}),
    Case("R24", "POST", "/jobs", json=JOB | {"team": "nobody"}),
    Case("R25", "POST", "/jobs", json=JOB | {"priority": "urgent"}),
    Case("R26", "POST", "/jobs", json=JOB | {"colour": "blue"}),
    Case("R27", "POST", "/jobs", json=JOB | {"preemptible": "true"}),
    Case("R28", "POST", "/jobs", json=JOB | {"max_sites": 0}),
    Case("R29", "POST", "/jobs", json=JOB | {"dataset_gb": 1e300}),
    Case(
        "R30", "POST", "/jobs", content=b'{"team": "llm"}', headers={"Content-Type": "text/plain"}
    ),
    Case(
        "R31",
        "POST",
        "/jobs",
        content=b"team=llm&gpus=8",
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    ),
    Case(
        "R32", "POST", "/jobs", content=b"{not json", headers={"Content-Type": "application/json"}
    ),
    Case("R33", "POST", "/jobs", content=b"", headers={"Content-Type": "application/json"}),
    Case("R34", "POST", "/jobs", role="member", json=JOB | {"team": "vision"}),
    Case("R35", "POST", "/jobs", role="none", json=JOB),
    Case("R36", "GET", "/jobs", params={"team": "nosuch"}),
    Case("R37", "GET", "/jobs", params={"site": "mars"}),
    Case("R38", "GET", "/jobs", params={"state": "done"}),
    Case("R39", "GET", "/jobs", params={"limit": 100_000}),
    Case("R40", "GET", "/jobs", params={"offset": 10**30}),
    Case("R41", "GET", "/jobs", role="member", params={"team": "vision"}),
    Case("R42", "GET", "/jobs/j-nosuch"),
    Case("R43", "GET", "/jobs/" + "j" * 200),
    Case("R44", "GET", "/jobs/j-nosuch/logs", params={"offset": -1}),
    Case("R45", "GET", "/jobs/j-nosuch/logs", params={"offset": 10**30}),
    Case("R46", "POST", "/jobs/j-nosuch/cancel"),
    Case("R47", "POST", "/tokens", json={"role": "root"}),
    Case("R48", "POST", "/tokens", json={"role": "member"}),
    Case("R49", "POST", "/tokens", json={"role": "member", "team": "nosuch"}),
    Case("R50", "POST", "/tokens", json={"role": "agent", "site": "tokyo\u202e"}),
    Case("R51", "POST", "/tokens", role="member", json={"role": "admin"}),
    Case("R52", "GET", "/reports/gpu", params={"month": "2026-13"}),
    Case("R53", "GET", "/reports/gpu"),
    Case("R54", "GET", "/events", params={"after": 10**30}),
    Case("R55", "GET", "/events", params={"limit": 0}),
    Case("R56", "GET", "/routes", params={"site": "mars"}),
    Case("R57", "DELETE", "/jobs"),
    Case("R58", "POST", "/datasets", json=DATASET | {"site": "mars"}),
    Case("R59", "POST", "/datasets", json=DATASET | {"path": "data/corpus"}),
    Case("R60", "POST", "/datasets", json=DATASET | {"name": "Corpus"}),
    Case("R61", "POST", "/datasets", json=DATASET | {"path": "/d/a\nb"}),
    Case("R62", "POST", "/datasets", role="agent", json=DATASET),
    Case("R63", "GET", "/datasets/nosuch"),
    Case("R64", "GET", "/scans/s-nosuch"),
    Case("R65", "POST", "/transfers", json=PUSH | {"dataset": "nosuch"}),
    Case("R66", "POST", "/transfers", json=PUSH | {"to": "mars"}),
    Case("R67", "POST", "/transfers", json=PUSH),
    Case("R68", "POST", "/transfers", json=PUSH | {"from": "singapore"}),
    Case("R69", "POST", "/transfers", json=PUSH | {"version": "abc"}),
    Case("R70", "POST", "/transfers", json=PUSH | {"form": "x"}),
    Case("R71", "GET", "/transfers", params={"state": "done"}),
    Case("R72", "GET", "/transfers/t-nosuch"),
    Case("R73", "POST", "/transfers/t-nosuch/cancel"),
    Case("R74", "POST", "/jobs", json=JOB | {"checkpoint_interval_s": 0}),
    Case("R75", "POST", "/jobs", json=JOB | {"checkpoint_interval_s": 1e9}),
    Case(
        "R76",
        "POST",
        "/jobs",
        content=b'{"team": "llm", "gpus": 8, "command": ["true"], "duration_s": 60, '
        b'"checkpoint_interval_s": NaN}',
        headers={"Content-Type": "application/json"},
    ),
    Case("R77", "POST", "/jobs", json=JOB | {"checkpoint_interval_s": "600"}),
    Case("R78", "POST", "/jobs", json=JOB | {"checkpoint_on_sigterm": "true"}),
    Case(
        "A1", "POST", SYNC, role="agent", json={"agent_id": "a", "capacity": {"H800": -5, "TPU": 9}}
    ),
    Case("A2", "POST", SYNC, role="agent", json={"agent_id": "a", "capacity": {"H800": 10**23}}),
    Case("A3", "POST", SYNC, role="agent", json={"agent_id": "a", "capacity": {"H" * 64: 8}}),
    Case("A4", "POST", SYNC, role="agent", json={"agent_id": ""}),
    Case(
        "A5",
        "POST",
        SYNC,
        role="agent",
        json={
            "agent_id": "a",
            "attempts": [{"attempt_id": "x", "job_id": "j", "state": "exited", "exit_code": 2**40}],
        },
    ),
    Case(
        "A6",
        "POST",
        SYNC,
        role="agent",
        json={"agent_id": "a", "logs": [{"attempt_id": "x", "offset": 0, "data": "x" * 70_000}]},
    ),
    Case("A7", "POST", SYNC, role="agent", json={"agent_id": "a", "problem": "x" * 3000}),
    Case(
        "A8",
        "POST",
        SYNC,
        role="agent",
        content=b"agent_id=a",
        headers={"Content-Type": "text/plain"},
    ),
    Case("A9", "POST", "/agents/singapore/sync", role="agent", json={"agent_id": "a"}),
    Case("A10", "POST", SYNC, role="agent", json={"agent_id": "a", "capacity": {"TPU": 9}}),
    Case(
        "A11",
        "POST",
        SYNC,
        role="none",
        content=b"{not json",
        headers={"Content-Type": "application/json"},
    ),
    Case("A12", "POST", SYNC, role="none", json={"agent_id": ""}),
    Case("A13", "POST", SYNC, role="agent", json=_data({"scans": [SCAN | {"root": "xyz"}]})),
    Case("A14", "POST", SYNC, role="agent", json=_data({"port": 70_000})),
    Case("A15", "POST", SYNC, role="agent", json=_data({"address": "localhost"})),
    Case("A16", "POST", SYNC, role="agent", json=_data({"replicas": [REPLICA]})),
    Case("A17", "POST", SYNC, role="agent", json=_data({"transfers": [TRANSFER]})),
)


def _outcome(server: RunningServer, tokens: dict[str, str], case: Case) -> tuple[int, str, str]:
    headers = dict(case.headers)
    if case.role != "none":
        headers["Authorization"] = f"Bearer {tokens[case.role]}"
    content = case.content() if callable(case.content) else case.content
    response = httpx.request(
        case.method,
        f"{server.url}/api/v1{case.path}",
        json=case.json,
        params=case.params,
        content=content,
        headers=headers,
        timeout=30,
    )
    error = response.json()["error"]
    return response.status_code, error["code"], error["message"]


def _rows() -> dict[str, list[str]]:
    rows = {}
    for line in PAGE.read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if re.fullmatch(r"[RA]\d+", cells[0]):
            rows[cells[0]] = cells
    return rows


def test_every_rest_row_of_the_page_is_what_the_server_answers(
    module_server: RunningServer,
) -> None:
    tokens = {
        "admin": module_server.admin_token,
        "member": module_server.token(role="member", team="llm"),
        "agent": module_server.token(role="agent", site="tokyo"),
    }
    rows = _rows()
    assert sorted(rows) == sorted(c.id for c in CASES), "the page and the cases differ"
    for case in CASES:
        status, code, message = _outcome(module_server, tokens, case)
        row = " | ".join(rows[case.id])
        assert f"{status} `{code}`" in row, (case.id, status, code, message)
        shown = message[:60].replace("|", "\\|")
        assert shown in row, (case.id, message)
    admin = module_server.admin()
    assert admin.jobs() == []  # and not one of them stored a job, dataset or transfer
    assert [d.name for d in admin.datasets()] == ["cc-zh-2026", "imagenet-21k", "speech-ja-10k"]
    assert admin.transfers(state="all") == []
