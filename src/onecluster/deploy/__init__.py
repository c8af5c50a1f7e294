"""What a monitoring stack needs to watch onecluster, shipped with the package
(``docs/noc.md``): Prometheus alerting and recording rules, and a Grafana dashboard.

* :data:`RULES_FILE` — ``prometheus/onecluster.rules.yml``: load it with ``rule_files``.
* :data:`DASHBOARD_FILE` — ``grafana/onecluster.json``: import it; it asks for a Prometheus
  data source (the ``datasource`` variable).

``python -c 'import onecluster.deploy as d; print(d.RULES_FILE)'`` says where they are
installed.
"""

from pathlib import Path

__all__ = ["DASHBOARD_FILE", "RULES_FILE"]

_HERE = Path(__file__).resolve().parent
#: The Prometheus rules file (alerts and the recording rules they use).
RULES_FILE = _HERE / "prometheus" / "onecluster.rules.yml"
#: The Grafana dashboard (JSON model, data source as a variable).
DASHBOARD_FILE = _HERE / "grafana" / "onecluster.json"
