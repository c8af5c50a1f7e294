"""`onecluster plan`: flags, the table, one JSON object with --json, bad input as exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onecluster.cli import build_app
from onecluster.cli._plan import parse_count, parse_site_counts
from onecluster.errors import ValidationError

ROOT = Path(__file__).resolve().parents[2]
FABRIC = str(ROOT / "examples" / "fabrics" / "three-site.yaml")
SCENARIO = [
    "plan",
    "--fabric",
    FABRIC,
    "--model-params",
    "70B",
    "--sites",
    "shanghai,singapore",
    "--nodes-per-site",
    "64",
]


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(build_app(), list(args), env={"COLUMNS": "200"})
    return result.exit_code, result.stdout, result.stderr


def test_the_70b_scenario_as_json() -> None:
    code, out, err = _run(*SCENARIO, "--json")
    assert code == 0, err
    body = json.loads(out)
    assert body["fabric"] == "three-site"
    assert body["inputs"]["sites"] == {"shanghai": 512, "singapore": 512}
    assert body["compute"]["gpus"] == 1024
    assert body["compute"]["step_compute_s"] == pytest.approx(4.35, abs=0.005)
    modes = {m["mode"]: m for m in body["modes"]}
    assert modes["diloco"]["average_gbps_per_site"] == pytest.approx(1.3, rel=0.05)
    assert body["verdict"]["mode"] == "diloco-streaming"
    assert body["critic"]["link_distance_km"] == 7200
    # the fabric's Shanghai holds H800s, not the H100s planned: said on stderr, not stdout
    assert "site shanghai holds 0 H100 GPUs" in err


def test_the_table_shows_every_mode_the_verdict_and_the_three_numbers() -> None:
    code, out, err = _run(*SCENARIO, "--gpu-type", "H800")
    assert code == 0, err
    for text in (
        "70B parameters on 1,024 H800",
        "shanghai ↔ singapore: 71 ms RTT, 2 Gbit/s, 7,200 km (fabric)",
        "DDP, hierarchical",
        "DDP, flat ring",
        "DiLoCo H=100, 8-bit",
        "DiLoCo H=100, 8-bit, streaming",
        "verdict: diloco-streaming",
        "link distance",
        "bandwidth / node",
        "recovery",
    ):
        assert text in out


def test_every_flag_reaches_the_inputs() -> None:
    code, out, err = _run(
        "plan", "--fabric", FABRIC, "--model-params", "7e9",
        "--gpus-per-site", "shanghai=64,tokyo=32", "--gpus-per-node", "4",
        "--gpu-type", "A100", "--gpu-tflops", "300", "--mfu", "0.5",
        "--tokens-per-step", "2Mi", "--nic-gbps", "0.5", "--intra-gbps", "200",
        "--bytes-per-param", "4", "--h", "50", "--bits", "4", "--buckets", "3",
        "--overlap", "0.5", "--window-bytes", "16Mi", "--streams-per-node", "16",
        "--detection-timeout-s", "2", "--state-bytes-per-param", "14",
        "--rejoin-overhead-s", "30", "--target-penalty", "0.1", "--json",
    )  # fmt: skip
    assert code == 0, err
    i = json.loads(out)["inputs"]
    assert i == {
        "model_params": 7e9,
        "sites": {"shanghai": 64, "tokyo": 32},
        "gpu_type": "A100",
        "gpu_tflops": 300.0,
        "mfu": 0.5,
        "tokens_per_step": 2 * 2**20,
        "step_time_s": None,
        "gpus_per_node": 4,
        "nic_gbps": 0.5,
        "intra_gbps": 200.0,
        "bytes_per_param": 4.0,
        "h": 50,
        "bits": 4,
        "buckets": 3,
        "overlap": 0.5,
        "window_bytes": 16 * 2**20,
        "streams_per_node": 16,
        "detection_timeout_s": 2.0,
        "state_bytes_per_param": 14.0,
        "rejoin_overhead_s": 30.0,
        "target_penalty": 0.1,
    }


def test_a_single_count_applies_to_every_site_by_default() -> None:
    code, out, err = _run(
        "plan", "--fabric", FABRIC, "--model-params", "7B", "--gpus-per-site", "64", "--json"
    )
    assert code == 0, err
    body = json.loads(out)
    assert body["inputs"]["sites"] == {"shanghai": 64, "singapore": 64, "tokyo": 64}
    assert len(body["hops"]) == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sites", "shanghai,mars", "--gpus-per-site", "64"], "has no site 'mars'"),
        (["--gpus-per-site", "0"], "the GPUs at site shanghai must be a whole number"),
        (["--gpus-per-site", "-8"], "must be a whole number of at least 1"),
        (["--gpus-per-site", "64", "--bits", "12"], "--bits must be one of 4, 8, 16, 32"),
        (["--gpus-per-site", "64", "--mfu", "0"], "--mfu must be a finite number"),
        (["--gpus-per-site", "64", "--h", "0"], "--h must be a whole number"),
        (["--gpus-per-site", "64", "--nic-gbps", "-1"], "--nic-gbps"),
        (["--gpus-per-site", "64", "--gpu-type", "B200"], "no peak throughput"),
        (["--gpus-per-site", "60"], "not a whole number of 8-GPU nodes"),
        (["--gpus-per-site", "shanghai"], "is not a whole number"),
        (["--gpus-per-site", "shanghai=x"], "of site shanghai 'x' is not a whole number"),
        (["--gpus-per-site", "=8"], "is not site=N"),
        (["--gpus-per-site", "shanghai=8,shanghai=8"], "names site shanghai twice"),
        (["--gpus-per-site", "shanghai=8,tokyo=8", "--sites", "shanghai"], "differ"),
        (["--sites", "shanghai", "--gpus-per-site", "8"], "at least two sites"),
        ([], "exactly one of --gpus-per-site and --nodes-per-site"),
        (["--gpus-per-site", "8", "--nodes-per-site", "1"], "exactly one of"),
        (["--gpus-per-site", "8", "--tokens-per-step", "lots"], "is not a number"),
    ],
)
def test_bad_input_is_exit_2_with_a_clear_message(args: list[str], message: str) -> None:
    code, out, err = _run("plan", "--fabric", FABRIC, "--model-params", "7B", *args)
    assert code == 2
    assert message in err
    assert out == ""


def test_a_site_with_no_circuit_to_another_chosen_site_is_exit_2(tmp_path: Path) -> None:
    fabric = tmp_path / "line.yaml"
    fabric.write_text(
        "fabric: line\nsites:\n"
        + "".join(
            f"  - {{name: {n}, region: r, jurisdiction: J, "
            "pools: [{gpu_type: H100, count: 8}]}\n"
            for n in ("a", "b", "c")
        )
        + "circuits:\n"
        "  - {name: ab, between: [a, b], capacity_gbps: 10, rtt_ms: 5}\n"
        "  - {name: bc, between: [b, c], capacity_gbps: 10, rtt_ms: 5}\n",
        encoding="utf-8",
    )
    code, _, err = _run(
        "plan", "--fabric", str(fabric), "--model-params", "1B", "--gpus-per-site", "a=8,c=8"
    )
    assert code == 2
    assert "site a has no circuit to any other chosen site (c)" in err


def test_parse_count_and_site_counts() -> None:
    assert parse_count("70B", what="x") == 70e9
    assert parse_count("4Mi", what="x") == 4 * 2**20
    assert parse_count("1.5e3", what="x") == 1500
    assert parse_count("2T", what="x") == 2e12
    with pytest.raises(ValidationError):
        parse_count("4Qi", what="x")
    assert parse_site_counts("512", what="x") == 512
    assert parse_site_counts(" a = 8 , b=16", what="x") == {"a": 8, "b": 16}
