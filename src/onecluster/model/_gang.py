"""Where the processes of a gang job meet: the base port of their rendezvous.

A gang's attempts at several sites learn each other from ``$ONECLUSTER_GANG_*``
(``docs/contracts.md``); the port is the one thing they cannot be told per site, because every
site must arrive at the same number without asking anyone.  So it is a pure function of the
job's id, the same at every site and in every run of the job.
"""

from __future__ import annotations

import zlib

__all__ = ["GANG_PORT_BLOCK", "GANG_PORT_FIRST", "GANG_PORT_SLOTS", "gang_port"]

#: The lowest base port (above the registered ports most services bind).
GANG_PORT_FIRST = 20_000
#: Ports one job may use from its base: ``base + 16 * site_rank + local_rank`` (16 sites of
#: 16 processes).
GANG_PORT_BLOCK = 256
#: How many blocks there are; the last one ends below 60 960.  Most of them lie inside Linux's
#: default ephemeral range (32 768–60 999), so a port may be taken by chance: the runtime has
#: to say so rather than hang.
GANG_PORT_SLOTS = 160


def gang_port(job_id: str) -> int:
    """The base port of job ``job_id``'s rendezvous: ``20000 + (crc32(job_id) % 160) * 256``.

    The same for every site and every run of the job, a multiple of 256 from 20 000 to
    60 704; two jobs share it with a chance of 1 in 160, which matters only when they also
    share a host.
    """
    slot = zlib.crc32(job_id.encode()) % GANG_PORT_SLOTS
    return GANG_PORT_FIRST + slot * GANG_PORT_BLOCK
