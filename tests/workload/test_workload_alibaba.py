import zlib
from pathlib import Path

import pytest

from onecluster.errors import TraceError
from onecluster.workload import (
    is_alibaba_header,
    load_trace,
    parse_alibaba,
    read_alibaba,
    trace_format,
)

HEADER = (
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,"
    "creation_time,deletion_time,scheduled_time"
)
ROWS = [
    "pod-a,1000,100,1,1000,,LS,Running,100,400,110",  # 290 s
    "pod-b,1000,100,0,0,,BE,Running,120,900,120",  # CPU only: skipped
    "pod-c,1000,100,1,460,V100M16|V100M32,BE,Failed,130,300,140",  # fractional: 1 GPU
    "pod-d,1000,100,8,1000,,Burstable,Pending,150,900,",  # never scheduled: dropped
    "pod-e,1000,100,8,1000,T4,LS,Succeeded,160,160,160",  # zero duration: dropped
    "pod-f,1000,100,4,1000,,Guaranteed,Running,50,5000,60",  # earliest
]
TRACE = (
    Path(__file__).resolve().parents[3] / "shared" / "data" / "traces" / "alibaba_v2023_pods.csv"
)


def test_pods_become_jobs() -> None:
    jobs = parse_alibaba([HEADER, *ROWS])
    assert [j.name for j in jobs] == ["pod-f", "pod-a", "pod-c"]
    f, a, c = jobs
    assert (f.submit_time, f.duration_s, f.gpus) == (0.0, 4940.0, 4)
    assert (a.submit_time, a.duration_s, a.gpus) == (50.0, 290.0, 1)
    assert (c.gpus, c.duration_s) == (1, 160.0)
    assert c.gpu_types == ("V100M16", "V100M32")
    assert [j.team for j in jobs] == ["trace-guaranteed", "trace-ls", "trace-be"]


def test_team_mapping_is_a_stable_hash_and_home_follows_team() -> None:
    teams = ("llm", "vision", "speech")
    homes = {"llm": "shanghai", "vision": "singapore", "speech": "tokyo"}
    jobs = parse_alibaba([HEADER, *ROWS], teams=teams, home_sites=homes)
    for j in jobs:
        assert j.team == teams[zlib.crc32(j.name.encode()) % 3]
        assert j.home_site == homes[j.team]


def test_gpu_map_translates_and_rejects_unknown_models() -> None:
    gpu_map = {"V100M16": "A100", "V100M32": "A100", "T4": "L40S"}
    jobs = parse_alibaba([HEADER, *ROWS], gpu_map=gpu_map)
    assert jobs[2].gpu_types == ("A100",)
    with pytest.raises(TraceError, match=r"line 4: GPU model 'V100M16' is not in the GPU map"):
        parse_alibaba([HEADER, *ROWS], gpu_map={"T4": "L40S"})


def test_scale_slice_clip_and_start() -> None:
    jobs = parse_alibaba([HEADER, *ROWS], time_scale=10.0, skip=1, limit=1, max_duration_s=100)
    assert len(jobs) == 1
    assert jobs[0].name == "pod-a"
    assert jobs[0].submit_time == 0.0
    assert jobs[0].duration_s == 100
    late = parse_alibaba([HEADER, *ROWS], start_s=120)
    assert [j.name for j in late] == ["pod-c"]


def test_bad_numbers_and_missing_columns_are_reported() -> None:
    with pytest.raises(TraceError, match="line 3: a count or a time"):
        parse_alibaba([HEADER, ROWS[0], "pod-x,1,1,one,1000,,LS,Running,1,2,1"])
    with pytest.raises(TraceError, match="'scheduled_time'"):
        parse_alibaba(["name,num_gpu,gpu_spec,qos,creation_time,deletion_time", "p,1,,LS,0,1"])


def test_format_is_detected_from_the_header(tmp_path: Path) -> None:
    assert is_alibaba_header(HEADER)
    assert not is_alibaba_header("submit_time,duration,num_gpus,team")
    path = tmp_path / "pods.csv"
    path.write_text("\n".join([HEADER, *ROWS]) + "\n", encoding="utf-8")
    assert trace_format(path) == "alibaba"
    jobs = load_trace(
        path, teams=("llm",), home_sites={"llm": "tokyo"}, limit=2, max_duration_s=1000
    )
    assert [(j.name, j.duration_s) for j in jobs] == [("pod-f", 1000), ("pod-a", 290)]
    assert {j.home_site for j in jobs} == {"tokyo"}


@pytest.mark.skipif(not TRACE.exists(), reason="the Alibaba trace is not in ../shared/data")
def test_reads_the_real_trace() -> None:
    jobs = read_alibaba(TRACE, teams=("llm", "vision", "speech"))
    assert len(jobs) == 6203  # 7,064 GPU pods, less 861 never scheduled
    assert jobs[0].submit_time == 0.0
    assert all(j.duration_s > 0 and j.gpus in (1, 2, 4, 8) for j in jobs)
    counts = {t: sum(j.team == t for j in jobs) for t in ("llm", "vision", "speech")}
    assert min(counts.values()) > 1800  # the hash splits pods roughly evenly


def test_a_pod_list_with_columns_missing_names_the_pod_lists_columns(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text("name,num_gpu,creation_time\npod-a,1,5\n")
    assert trace_format(path) == "alibaba"
    with pytest.raises(TraceError) as raised:
        load_trace(path)
    message = raised.value.message
    assert str(path) in message and "line 1" in message and "Alibaba v2023 pod list" in message
    for column in ("gpu_spec", "qos", "deletion_time", "scheduled_time"):
        assert repr(column) in message
    assert "submit_time" not in message  # not the project's own columns


def test_a_negative_gpu_count_is_a_bad_line_not_a_cpu_pod() -> None:
    rows = [*ROWS, "pod-g,1000,100,-2,1000,,LS,Running,170,900,170"]
    with pytest.raises(TraceError) as raised:
        parse_alibaba([HEADER, *rows], source="pods.csv")
    assert raised.value.message == "pods.csv has 1 bad line: line 8: num_gpu is negative (-2)"


def test_a_pod_list_with_only_a_header_is_an_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "pods.csv"
    path.write_text(HEADER + "\n\n")
    with pytest.raises(TraceError, match=r"pods\.csv has a header \(line 1\) and no rows"):
        load_trace(path)
