"""Which transfers are exports (pure).

A site whose jurisdiction controls exports (``controls_export`` in the fabric) keeps its
data inside that jurisdiction unless an approved export takes it out.  A transfer from such
a site is an *export* when its destination lies in another jurisdiction.  A relay is a copy
in transit on the relaying site, so a transfer from such a site never relays through a site
outside its jurisdiction — not for a transfer that stays at home, and not for an export
either (no approval names the relaying site; ``docs/export.md``).
"""

from __future__ import annotations

from onecluster.model import Fabric

__all__ = ["is_export", "relay_allowed"]


def is_export(fabric: Fabric, src: str, dst: str) -> bool:
    """Whether moving data from site ``src`` to site ``dst`` takes it out of a jurisdiction
    that controls exports."""
    source = fabric.site(src)
    return source.controls_export and fabric.site(dst).jurisdiction != source.jurisdiction


def relay_allowed(fabric: Fabric, src: str, relay: str) -> bool:
    """Whether a transfer from ``src`` may pass through ``relay`` on its way."""
    source = fabric.site(src)
    return not source.controls_export or fabric.site(relay).jurisdiction == source.jurisdiction
