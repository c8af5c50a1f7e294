"""The shipped Grafana dashboard: a JSON model with unique panel ids, a data source variable
every query uses, and PromQL that parses."""

from __future__ import annotations

from shipped import dashboard, dashboard_exprs, metric_names, recorded

from onecluster.deploy import DASHBOARD_FILE

SECTIONS = {
    "Circuits",
    "GPUs and queue",
    "Transfers",
    "Export register",
    "Gateway",
    "Data plane and training",
}


def test_the_dashboard_is_shipped_and_has_a_uid() -> None:
    assert DASHBOARD_FILE.is_file()
    assert dashboard()["uid"] == "onecluster-noc"


def test_panel_ids_are_unique_and_panels_do_not_overlap() -> None:
    panels = dashboard()["panels"]
    ids = [p["id"] for p in panels]
    assert len(ids) == len(set(ids))
    cells = set()
    for p in panels:
        g = p["gridPos"]
        assert g["x"] >= 0 and g["x"] + g["w"] <= 24
        mine = {
            (x, y) for x in range(g["x"], g["x"] + g["w"]) for y in range(g["y"], g["y"] + g["h"])
        }
        assert not cells & mine, p["title"]
        cells |= mine


def test_the_data_source_is_a_variable_every_panel_and_query_uses() -> None:
    [variable] = [v for v in dashboard()["templating"]["list"] if v["type"] == "datasource"]
    assert variable["query"] == "prometheus"
    for p in dashboard()["panels"]:
        if p["type"] == "row":
            continue
        assert p["datasource"]["uid"] == "${" + variable["name"] + "}", p["title"]
        assert p["targets"], p["title"]
        assert all(t["datasource"] == p["datasource"] for t in p["targets"])


def test_it_has_a_section_for_each_thing_the_noc_watches() -> None:
    rows = {p["title"] for p in dashboard()["panels"] if p["type"] == "row"}
    assert rows >= SECTIONS


def test_every_query_parses_and_selects_onecluster_metrics() -> None:
    for expr in dashboard_exprs():
        names = metric_names(expr)
        assert names, expr
        assert all(n.startswith("onecluster") for n in names), expr
        assert all(n in recorded() for n in names if ":" in n), expr
