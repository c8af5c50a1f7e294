import time
from pathlib import Path

import pytest

from onecluster.errors import TraceError
from onecluster.workload import load_trace, parse_trace, read_trace, select_jobs, trace_format

HEADER = "submit_time,duration,num_gpus,team"


def test_reads_required_and_optional_columns() -> None:
    text = [
        "Team,submit_time,duration,num_gpus,gpu_type,dataset,dataset_gb,home_site,extra",
        "llm,10,3600,8,H100|H800,cc-zh,1.5,shanghai,ignored",
        "vision,0,60,1,,,,,",
    ]
    jobs = parse_trace(text)
    assert len(jobs) == 2
    first = jobs[0]
    assert (first.team, first.submit_time, first.duration_s, first.gpus) == ("llm", 10, 3600, 8)
    assert first.gpu_types == ("H100", "H800")
    assert first.dataset == "cc-zh"
    assert first.dataset_bytes == 1_500_000_000
    assert first.home_site == "shanghai"
    second = jobs[1]
    assert second.gpu_types == ()
    assert second.dataset is None
    assert second.dataset_bytes == 0
    assert second.home_site is None


def test_missing_required_column_is_named() -> None:
    with pytest.raises(TraceError, match="'num_gpus'"):
        parse_trace(["submit_time,duration,team", "0,1,llm"])


def test_empty_file_is_an_error() -> None:
    with pytest.raises(TraceError, match="header"):
        parse_trace([])


def test_bad_rows_are_reported_with_line_numbers() -> None:
    text = [
        HEADER,
        "0,10,1,llm",  # line 2: fine
        "x,10,1,llm",  # line 3: submit not a number
        "0,-5,1,llm",  # line 4: negative duration
        "",  # line 5: blank, skipped
        "0,10,1.5,llm",  # line 6: fractional GPUs
        "0,10,1,Bad Team",  # line 7: invalid team name
        "0,10,0,llm",  # line 8: no GPUs
    ]
    with pytest.raises(TraceError) as info:
        parse_trace(text, source="t.csv")
    message = info.value.message
    assert message.startswith("t.csv has 5 bad lines")
    for line in (3, 4, 6, 7, 8):
        assert f"line {line}:" in message
    assert "line 2:" not in message
    assert "line 5:" not in message


def test_error_names_at_most_ten_lines_and_counts_the_rest() -> None:
    text = [HEADER] + ["0,nope,1,llm"] * 15
    with pytest.raises(TraceError) as info:
        parse_trace(text)
    assert "line 11:" in info.value.message
    assert "line 12:" not in info.value.message
    assert "and 5 more" in info.value.message


def test_short_rows_count_missing_cells_as_empty() -> None:
    with pytest.raises(TraceError, match="line 2: team is empty"):
        parse_trace([HEADER, "0,10,1"])


def test_read_trace_from_file_and_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(HEADER + "\n5,100,2,llm\n0,50,1,vision\n", encoding="utf-8")
    jobs = read_trace(path)
    assert [j.team for j in jobs] == ["llm", "vision"]
    assert trace_format(path) == "csv"
    loaded = load_trace(path, time_scale=5.0, max_duration_s=60)
    assert [(j.team, j.submit_time, j.duration_s) for j in loaded] == [
        ("vision", 0.0, 50),
        ("llm", 1.0, 60),
    ]
    with pytest.raises(TraceError, match="does not exist"):
        read_trace(tmp_path / "absent.csv")


def test_select_slices_and_compresses() -> None:
    jobs = parse_trace([HEADER] + [f"{t},10,1,llm" for t in (40, 10, 30, 20)])
    kept = select_jobs(jobs, time_scale=2.0, skip=1, limit=2, rebase=True)
    assert [j.submit_time for j in kept] == [0.0, 5.0]
    with pytest.raises(TraceError):
        select_jobs(jobs, time_scale=0.0)


def test_hundred_thousand_rows_read_quickly() -> None:
    rows = [HEADER + ",gpu_type"] + [
        f"{i},{60 + i % 900},{1 + i % 8},team-{i % 7},H100" for i in range(100_000)
    ]
    start = time.perf_counter()
    jobs = parse_trace(rows)
    elapsed = time.perf_counter() - start
    assert len(jobs) == 100_000
    assert jobs[-1].gpus == 1 + 99_999 % 8
    assert elapsed < 5.0  # generous: about 0.5 s on the 2-core development machine


def test_a_trace_with_only_a_header_is_an_error_naming_the_file_and_line() -> None:
    with pytest.raises(TraceError) as raised:
        parse_trace(["submit_time,duration,num_gpus,team", ""], source="t.csv")
    assert raised.value.message == (
        "t.csv has a header (line 1) and no rows after it: there is no job to read"
    )


def test_a_negative_gpu_count_names_the_file_and_line() -> None:
    lines = ["submit_time,duration,num_gpus,team", "0,60,2,llm", "5,60,-8,llm"]
    with pytest.raises(TraceError, match=r"^t\.csv has 1 bad line: line 3: .*-8"):
        parse_trace(lines, source="t.csv")
