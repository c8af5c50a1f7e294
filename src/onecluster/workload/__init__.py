"""Workloads: trace readers (the project's CSV, Alibaba GPU v2023) and a generator fitted to
the Alibaba trace for machines that do not have it."""

from onecluster.workload._alibaba import is_alibaba_header, parse_alibaba, read_alibaba
from onecluster.workload._csv import REQUIRED_COLUMNS, parse_trace, read_trace
from onecluster.workload._generate import FittedWorkload, generate, load_fitted
from onecluster.workload._job import TraceJob
from onecluster.workload._load import load_trace, trace_format
from onecluster.workload._load_factor import at_load, offered_load
from onecluster.workload._rows import select as select_jobs
from onecluster.workload._shaped import shaped

__all__ = [
    "REQUIRED_COLUMNS",
    "FittedWorkload",
    "TraceJob",
    "at_load",
    "generate",
    "is_alibaba_header",
    "load_fitted",
    "load_trace",
    "offered_load",
    "parse_alibaba",
    "parse_trace",
    "read_alibaba",
    "read_trace",
    "select_jobs",
    "shaped",
    "trace_format",
]
