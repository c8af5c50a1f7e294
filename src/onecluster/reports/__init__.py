"""Reports over usage: the monthly GPU report per team and per site (pure, no I/O)."""

from onecluster.reports._gpu import CSV_COLUMNS, GpuReport, ReportRow, gpu_report
from onecluster.reports._month import Month
from onecluster.reports._usage import UsageRecord, usage_record

__all__ = [
    "CSV_COLUMNS",
    "GpuReport",
    "Month",
    "ReportRow",
    "UsageRecord",
    "gpu_report",
    "usage_record",
]
