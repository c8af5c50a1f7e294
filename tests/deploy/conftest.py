"""The shipped Prometheus rules and Grafana dashboard (``onecluster.deploy``); helpers in
``shipped.py`` next to this file."""

from __future__ import annotations

import sys
from pathlib import Path

# Test helpers next to this file (shipped.py) import as top-level modules.
sys.path.insert(0, str(Path(__file__).parent))
