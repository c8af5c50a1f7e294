"""Reading the shipped rules and dashboard, and the metric names their PromQL uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import promql_parser
import yaml
from prometheus_client.parser import text_string_to_metric_families

from onecluster.deploy import DASHBOARD_FILE, RULES_FILE

RULES_TEST_FILE = Path(__file__).parent / "onecluster.rules.test.yml"


def rules() -> list[dict[str, Any]]:
    """Every rule of every group of the rules file."""
    doc = yaml.safe_load(RULES_FILE.read_text(encoding="utf-8"))
    return [rule for group in doc["groups"] for rule in group["rules"]]


def dashboard() -> dict[str, Any]:
    """The dashboard's JSON model."""
    loaded: dict[str, Any] = json.loads(DASHBOARD_FILE.read_text(encoding="utf-8"))
    return loaded


def dashboard_exprs() -> list[str]:
    """The PromQL of every panel's targets."""
    return [t["expr"] for p in dashboard()["panels"] for t in p.get("targets", [])]


def metric_names(expr: str) -> set[str]:
    """The metric names ``expr`` selects (``ValueError`` if it does not parse)."""
    found: set[str] = set()
    pending: list[object] = [promql_parser.parse(expr)]
    while pending:
        node = pending.pop()
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                found.add(node.name)
        elif isinstance(node, promql_parser.MatrixSelector):
            pending.append(node.vector_selector)
        elif isinstance(node, promql_parser.Call):
            pending.extend(node.args)
        elif isinstance(node, promql_parser.AggregateExpr):
            pending.extend(n for n in (node.expr, node.param) if n is not None)
        elif isinstance(node, promql_parser.BinaryExpr):
            pending.extend((node.lhs, node.rhs))
        elif isinstance(
            node, promql_parser.ParenExpr | promql_parser.UnaryExpr | promql_parser.SubqueryExpr
        ):
            pending.append(node.expr)
    return found


def recorded() -> set[str]:
    """The names the recording rules make."""
    return {r["record"] for r in rules() if "record" in r}


def used_names() -> set[str]:
    """Every metric name the rules and the dashboard select, but those recorded."""
    exprs = [r["expr"] for r in rules()] + dashboard_exprs()
    return set().union(*(metric_names(e) for e in exprs)) - recorded()


_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_count", "_sum"),
    "summary": ("_count", "_sum", ""),
}


def exported_names(exposition: str) -> set[str]:
    """The series names a ``/metrics`` answer offers, with the suffixes of each family's type
    (a family with no sample yet, such as a counter no label set has touched, counts)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(exposition):
        names.update(s.name for s in family.samples)
        names.update(family.name + suffix for suffix in _SUFFIXES.get(family.type, ("",)))
    return names
