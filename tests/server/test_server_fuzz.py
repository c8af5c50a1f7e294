"""Schemathesis against the real server, every operation, with a token of each role.

Checked on every generated request (valid and invalid ones): no 5xx; the answer conforms to
the server's own OpenAPI document (status, content type, body); and a refused request
changes nothing in the database.  The default run is bounded (seconds); the ``slow`` one
explores more.
"""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING, Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from onecluster.schema import (
    ApprovalIn,
    DataReport,
    DatasetAdd,
    ExportIn,
    JobSubmit,
    PushIn,
    ScanReport,
)
from onecluster.store._tables import Base

if TYPE_CHECKING:
    from conftest import RunningServer

pytestmark = [
    pytest.mark.integration,
    # Schemathesis sends through ``requests`` sessions of its own and may leave a connection of
    # one to the garbage collector; that socket is this test's client's, never the server's.
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"
    ),
]

ROLES = (
    "admin",
    "member",
    "compliance",
    "auditor",
    "agent",
)  # the agent last: it syncs tokyo as another agent id
#: Schemathesis's own list of answers that refuse invalid data, and 413: a body over the limit
#: is refused before it is parsed.  (5xx counts as a refusal here; the test refuses 5xx itself.)
REFUSALS = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
CONFIG = SchemathesisConfig.from_dict(
    {"checks": {"negative_data_rejection": {"expected-statuses": [*REFUSALS, "5xx"]}}}
)
#: A refused request must leave every table exactly as it was.
#: Every table but those the server's election renews by itself (its lease, its liveness).
TABLES = tuple(
    t.name for t in Base.metadata.sorted_tables if t.name not in {"leadership", "servers"}
)


def _tokens(server: RunningServer) -> dict[str, str]:
    return {
        "admin": server.admin_token,
        "member": server.token(role="member", team="llm"),
        "agent": server.token(role="agent", site="tokyo"),
        "compliance": server.token(role="compliance", holder="bob"),
        "auditor": server.token(role="auditor"),
    }


def _snapshot(server: RunningServer) -> dict[str, list[tuple[Any, ...]]]:
    with sqlite3.connect(
        f"file:{server.config.state_dir / 'onecluster.db'}?mode=ro", uri=True
    ) as db:
        return {t: db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall() for t in TABLES}


def _known(case: schemathesis.Case, team: str | None, dataset: str | None) -> schemathesis.Case:
    """Make a valid job body name things that exist, so that it gets through admission (an
    invalid one is left as it is: it must stay invalid)."""
    if team is not None and case.path == "/api/v1/jobs" and isinstance(case.body, dict):
        case.body["team"] = team
        case.body.pop("dataset", None)
        if dataset is not None:
            case.body["dataset"] = dataset
    return case


def _a_scan_and_a_transfer(server: RunningServer) -> tuple[str, str]:
    """Ids of a scan and a transfer that exist (dataset ``corpus`` scanned at tokyo)."""
    scan = server.admin().add_dataset(DatasetAdd(name="corpus", site="tokyo", path="/d/corpus"))
    done = ScanReport(id=scan.id, state="done", bytes_done=10, root="ab" * 32)
    server.sync("tokyo", data=DataReport(port=7400, scans=[done]))
    push = PushIn.model_validate({"dataset": "corpus", "to": "singapore"})
    return scan.id, server.admin().push(push).id


def _an_approval_and_an_export(server: RunningServer) -> tuple[str, str]:
    """Ids of an approved approval and an export under it (of ``records`` at shanghai)."""
    scan = server.admin().add_dataset(DatasetAdd(name="records", site="shanghai", path="/d/r"))
    done = ScanReport(id=scan.id, state="done", bytes_done=10, root="cd" * 32)
    server.sync("shanghai", data=DataReport(port=7400, scans=[done]))
    member = server.client(server.token(role="member", team="llm", holder="alice"))
    approval = member.request_approval(
        ApprovalIn(
            dataset="records",
            destinations=["singapore"],
            purpose="fuzzing",
            personal=False,
            route="exempt",
            route_ref="2024-Provisions Art.5(1)",
            valid_until=4_000_000_000.0,
            max_bytes=10**9,
        )
    )
    server.client(server.token(role="compliance", holder="bob")).approve(approval.id)
    export = member.start_export(ExportIn(dataset="records", to="singapore", approval=approval.id))
    return approval.id, export.id


def _fuzz(server: RunningServer, role: str, examples: int) -> int:
    """Fuzz every operation as ``role``; the number of requests made."""
    token = _tokens(server)[role]
    job = server.admin().submit(JobSubmit(team="llm", gpus=8, duration_s=60.0, command=["true"]))
    scan, transfer = _a_scan_and_a_transfer(server)
    approval, export = _an_approval_and_an_export(server)
    document = server.client(None)._http.get("/openapi.json").json()
    for operations in document["paths"].values():  # the test gives each role's token itself
        for operation in operations.values():
            operation["parameters"] = [
                p for p in operation.get("parameters", []) if p["name"] != "authorization"
            ]
    schema = schemathesis.openapi.from_dict(document, config=CONFIG)
    pinned = {
        "job_id": job.id,
        "site": "tokyo",
        "name": "corpus",
        "scan_id": scan,
        "transfer_id": transfer,
        "approval_id": approval,
        "export_id": export,
    }
    calls = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        names = {p.name for p in operation.path_parameters}
        fixed = [{}, {n: pinned[n] for n in names}] if names else [{}]  # also things that exist
        valid = st.builds(
            _known,
            st.one_of([operation.as_strategy(path_parameters=f) for f in fixed]),
            st.sampled_from([None, "llm"]),
            st.sampled_from([None, "cc-zh-2026"]),
        )
        invalid = [operation.as_strategy(GenerationMode.NEGATIVE, path_parameters=f) for f in fixed]

        @settings(
            max_examples=examples,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        @given(case=st.one_of(valid, *invalid))
        def run(case: schemathesis.Case) -> None:
            nonlocal calls
            calls += 1
            before = _snapshot(server)
            response = case.call(base_url=server.url, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code < 500, (case.method, case.formatted_path, response.text)
            if response.status_code >= 400:
                assert _snapshot(server) == before, (case.method, case.path, response.text)
            # Valid input may still be refused here (another team's job, an unknown site).
            # A query string carries text only: a "boolean" sent to a text parameter is that
            # text, and 0.0 a whole number (decisions), so what schemathesis calls invalid
            # there may be valid on the wire; bodies keep the check.
            excluded = [positive_data_acceptance]
            if case.method == "GET":
                excluded.append(negative_data_rejection)
            case.validate_response(response, excluded_checks=excluded)

        run()
    return calls


@pytest.mark.parametrize("role", ROLES)
def test_no_operation_fails_or_breaks_its_schema(module_server: RunningServer, role: str) -> None:
    assert _fuzz(module_server, role, examples=12) > 100


@pytest.mark.slow
@pytest.mark.parametrize("role", ROLES)
def test_no_operation_fails_or_breaks_its_schema_at_length(
    module_server: RunningServer, role: str
) -> None:
    _fuzz(module_server, role, examples=80)
