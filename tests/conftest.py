"""Suite-wide settings.

Under CI (``CI`` set), Hypothesis runs derandomized: the same examples every run, so a
submission's CI result does not depend on luck.  Locally it explores new examples each run
(and keeps failures in its database), which is where new bugs are found.
"""

from __future__ import annotations

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")
