"""The gang's base port: the same number at every site, inside its range, spread over it."""

from __future__ import annotations

import zlib

from hypothesis import given
from hypothesis import strategies as st

from onecluster.model import gang_port


def test_the_port_is_the_documented_formula() -> None:
    assert gang_port("j-1") == 20000 + (zlib.crc32(b"j-1") % 160) * 256
    assert gang_port("") == 20000  # crc32 of nothing is 0


@given(st.text(alphabet="abcdefj0123456789-", max_size=40))
def test_every_job_gets_a_block_of_256_ports_inside_the_range(job_id: str) -> None:
    port = gang_port(job_id)
    assert port == gang_port(job_id)  # every site computes the same
    assert (port - 20000) % 256 == 0
    assert 20000 <= port <= 20000 + 159 * 256
    assert port + 255 <= 65535  # base + 16 * site_rank + local_rank stays a port


def test_jobs_are_spread_over_the_blocks() -> None:
    ports = {gang_port(f"j-{n:08x}") for n in range(2000)}
    assert len(ports) == 160
