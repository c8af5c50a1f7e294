"""The shipped rules file, without promtool: its structure, every alert's labels and
annotations, and its PromQL parsed (``promql-parser``).  ``test_deploy_promtool.py`` checks
it with promtool where the host has it."""

from __future__ import annotations

import re

import pytest
from shipped import RULES_TEST_FILE, metric_names, recorded, rules

from onecluster.deploy import RULES_FILE

ALERTS = {
    "OneclusterCircuitDown",
    "OneclusterCircuitMinRttShift",
    "OneclusterApiErrorBudgetBurn",
    "OneclusterApiErrorBudgetBurnSlow",
    "OneclusterAgentLost",
    "OneclusterTransferStalled",
    "OneclusterChunksCorrupt",
    "OneclusterRegisterVerificationFailed",
    "OneclusterRegisterUnverified",
    "OneclusterGatewayUpstreamErrors",
}
DURATION = re.compile(r"^(\d+(ms|s|m|h|d|w|y))+$")


def test_the_rules_file_is_shipped_in_the_package() -> None:
    assert RULES_FILE.is_file()
    assert RULES_FILE.parent.parent.name == "deploy"  # onecluster/deploy/prometheus/


def test_every_alert_the_noc_needs_is_there_once() -> None:
    names = [r["alert"] for r in rules() if "alert" in r]
    assert len(names) == len(set(names))
    assert set(names) == ALERTS


@pytest.mark.parametrize("alert", sorted(ALERTS))
def test_every_alert_has_a_severity_a_summary_and_its_runbook(alert: str) -> None:
    [rule] = [r for r in rules() if r.get("alert") == alert]
    assert set(rule) <= {"alert", "expr", "for", "labels", "annotations", "keep_firing_for"}
    assert rule["labels"]["severity"] in ("critical", "warning")
    assert rule["annotations"]["summary"].strip()
    assert rule["annotations"]["description"].strip()
    assert rule["annotations"]["runbook_url"] == f"docs/noc.md#{alert.lower()}"
    assert "for" not in rule or DURATION.match(rule["for"])


def test_every_expression_parses_and_selects_metrics() -> None:
    for rule in rules():
        names = metric_names(rule["expr"])
        assert names, rule
        assert all(n.startswith("onecluster") for n in names), rule


def test_the_recording_rules_are_used_and_named_level_metric_operations() -> None:
    made = recorded()
    assert all(re.fullmatch(r"onecluster:[a-z_]+:[a-z0-9_]+", name) for name in made)
    used = set().union(*(metric_names(r["expr"]) for r in rules() if "alert" in r))
    assert made <= used


def test_an_unbalanced_expression_is_refused_by_the_parser() -> None:
    with pytest.raises(ValueError, match="unclosed"):
        metric_names("sum(rate(onecluster_route_changes_total[5m])")


def test_the_promtool_unit_tests_cover_every_alert() -> None:
    text = RULES_TEST_FILE.read_text(encoding="utf-8")
    assert {a for a in ALERTS if f"alertname: {a}\n" in text} == ALERTS
