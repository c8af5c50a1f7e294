"""`onecluster simulate`: one JSON object on stdout with --json, warnings on stderr."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from onecluster.cli import build_app

ROOT = Path(__file__).resolve().parents[2]
FABRIC = str(ROOT / "examples" / "fabrics" / "three-site.yaml")
HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)


def _alibaba(tmp_path: Path) -> Path:
    rows = [HEADER]
    rows += [
        f"pod-{i},1000,1024,{1 + i % 4},1000,{'V100M16' if i % 3 == 0 else ''},LS,Succeeded,"
        f"{i * 30},{i * 30 + 900},{i * 30}"
        for i in range(40)
    ]
    path = tmp_path / "pods.csv"
    path.write_text("\n".join(rows) + "\n", encoding="utf-8")
    return path


def test_json_output_is_exactly_one_object_and_warnings_go_to_stderr(tmp_path: Path) -> None:
    trace = _alibaba(tmp_path)
    result = CliRunner().invoke(
        build_app(),
        ["simulate", "--fabric", FABRIC, "--trace", str(trace), "--policy", "fifo", "--json"],
    )
    assert result.exit_code == 0, result.stderr
    body = json.loads(result.stdout)  # fails if anything but one JSON document is on stdout
    assert isinstance(body, dict)
    assert body["policy"] == "fifo"
    assert body["jobs"] == 40
    assert body["jobs_completed"] + body["jobs_rejected"] == 40
    assert "V100M16" in result.stderr and "warning" in result.stderr


def test_generated_workload_is_deterministic_per_seed() -> None:
    args = ["simulate", "--fabric", FABRIC, "--generate", "50", "--seed", "3", "--json"]
    first = json.loads(CliRunner().invoke(build_app(), args).stdout)
    again = json.loads(CliRunner().invoke(build_app(), args).stdout)
    first.pop("sim_wall_s"), again.pop("sim_wall_s")
    first.pop("jobs_per_second"), again.pop("jobs_per_second")
    assert first == again
    assert first["jobs"] == 50
    assert set(first["teams"]) <= {"llm", "vision", "speech"}


def test_table_output_names_the_policy_and_sites() -> None:
    result = CliRunner().invoke(
        build_app(),
        ["simulate", "--fabric", FABRIC, "--generate", "20", "--policy", "separate"],
        env={"COLUMNS": "200"},
    )
    assert result.exit_code == 0, result.stderr
    assert "policy separate" in result.stdout
    for site in ("shanghai", "singapore", "tokyo"):
        assert site in result.stdout


def test_exactly_one_workload_source_is_required() -> None:
    neither = CliRunner().invoke(build_app(), ["simulate", "--fabric", FABRIC])
    assert neither.exit_code == 2
    assert "exactly one of --trace and --generate" in neither.stderr
    both = CliRunner().invoke(
        build_app(), ["simulate", "--fabric", FABRIC, "--trace", "x.csv", "--generate", "5"]
    )
    assert both.exit_code == 2


def test_missing_fabric_and_bad_policy_are_exit_2(tmp_path: Path) -> None:
    missing = CliRunner().invoke(
        build_app(), ["simulate", "--fabric", str(tmp_path / "none.yaml"), "--generate", "5"]
    )
    assert missing.exit_code == 2
    assert "does not exist" in missing.stderr
    policy = CliRunner().invoke(
        build_app(), ["simulate", "--fabric", FABRIC, "--generate", "5", "--policy", "random"]
    )
    assert policy.exit_code == 2


def test_unreadable_trace_is_a_trace_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text(HEADER + "\npod-1,1,1,two,1000,,LS,Running,0,10,0\n", encoding="utf-8")
    result = CliRunner().invoke(
        build_app(), ["simulate", "--fabric", FABRIC, "--trace", str(bad), "--json"]
    )
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "error:" in result.stderr


def test_load_and_max_duration_shape_the_replay(tmp_path: Path) -> None:
    trace = _alibaba(tmp_path)
    base = ["simulate", "--fabric", FABRIC, "--trace", str(trace), "--json"]
    clipped = CliRunner().invoke(build_app(), [*base, "--max-duration", "60", "--load", "0.5"])
    assert clipped.exit_code == 0, clipped.stderr
    assert "offered load of 50%" in clipped.stderr
    body = json.loads(clipped.stdout)
    assert body["jobs_completed"] == 40
    # every job now runs 60 s, so no job can take longer than that once it started
    assert body["mean_jct_s"] - body["mean_wait_s"] <= 60.0 + 1e-6


def test_load_and_time_scale_are_exclusive(tmp_path: Path) -> None:
    trace = _alibaba(tmp_path)
    result = CliRunner().invoke(
        build_app(),
        ["simulate", "--fabric", FABRIC, "--trace", str(trace), "--load", "1", "--time-scale", "2"],
    )
    assert result.exit_code == 2
    assert "give one of them" in result.stderr


def test_the_window_utilization_stands_beside_the_makespans_with_the_reason() -> None:
    """`--load 1.0` said "offered load 100%" and then only "gpu_utilization 0.43"."""
    args = ["simulate", "--fabric", FABRIC, "--generate", "400", "--load", "1.0"]
    table = CliRunner().invoke(
        build_app(), [*args, "--max-duration", "3600"], env={"COLUMNS": "200"}
    )
    assert table.exit_code == 0, table.stderr
    rows = dict(line.split() for line in table.stdout.splitlines()[1:15] if len(line.split()) == 2)
    assert float(rows["window_utilization"]) > float(rows["gpu_utilization"])
    assert float(rows["arrival_span_s"]) < float(rows["makespan_s"])
    note = " ".join(table.stdout.split())
    assert "window_utilization: the same over the arrival span" in note
    assert "late jobs run on after the span" in note
    body = json.loads(
        CliRunner().invoke(build_app(), [*args, "--json", "--max-duration", "3600"]).stdout
    )
    assert body["window_utilization"] == float(rows["window_utilization"])
    assert body["arrival_span_s"] == float(rows["arrival_span_s"])


def test_a_trace_with_no_gpu_job_is_refused(tmp_path: Path) -> None:
    cpu_only = tmp_path / "cpu.csv"
    cpu_only.write_text(HEADER + "\npod-1,1,1,0,0,,LS,Running,0,10,0\n", encoding="utf-8")
    result = CliRunner().invoke(
        build_app(), ["simulate", "--fabric", FABRIC, "--trace", str(cpu_only)]
    )
    assert result.exit_code == 2
    assert f"{cpu_only} holds no GPU job to simulate" in result.stderr


def test_compare_prints_every_team_under_both_policies(tmp_path: Path) -> None:
    args = ["simulate", "--fabric", FABRIC, "--generate", "600", "--load", "1.2"]
    result = CliRunner().invoke(build_app(), [*args, "--compare", "separate", "--json"])
    assert result.exit_code == 0, result.stderr
    compare = json.loads(result.stdout)["compare"]
    assert compare["policy"] == "separate"
    assert {row["team"] for row in compare["teams"]} == {"llm", "vision", "speech"}
    assert all(
        {"wait_s", "wait_base_s", "jct_s", "gpu_h", "loses"} <= set(r) for r in compare["teams"]
    )
    table = CliRunner().invoke(build_app(), [*args, "--compare", "separate"])
    assert table.exit_code == 0, table.stderr
    assert "unified against separate" in table.stdout
    assert "WAIT" in table.stdout
