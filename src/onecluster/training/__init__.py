"""Training one model over several sites (``docs/training.md``).

Inside a site the workers are ordinary PyTorch (DDP or FSDP, every step); across sites
:class:`CrossSite` syncs them every ``sync_every`` steps (DiLoCo, int8 or 4-bit on the wire,
fp32 accumulation), or every step (``ddp`` mode, for metro distances).  Membership is the
sites' own: a lost site is left out after ``peer_timeout_s``, a returning one heals from a
live peer.  ``python -m onecluster.training launch -- CMD`` starts a site's workers (what
``onecluster train`` submits).  Needs the ``training`` extra (torch).
"""

from onecluster.training._config import Mode, SyncConfig
from onecluster.training._crosssite import CrossSite, Round, TrainStats
from onecluster.training._prometheus import PROMETHEUS_ENV, TrainingCollector, serve_metrics
from onecluster.training._timings import RunTimings
from onecluster.training._topology import Topology

__all__ = [
    "PROMETHEUS_ENV",
    "CrossSite",
    "Mode",
    "Round",
    "RunTimings",
    "SyncConfig",
    "Topology",
    "TrainStats",
    "TrainingCollector",
    "serve_metrics",
]
