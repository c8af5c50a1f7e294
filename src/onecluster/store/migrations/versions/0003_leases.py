"""Leases and hand-outs: the lease each site was granted, the agents a site's agent replaced
and until when the last one's lease ran, the agent each attempt was first handed to, and the
directory a job runs in.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-03
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None

#: The lease that servers before this revision granted (their agent timeout's default).
_OLD_LEASE_S = 10.0


def upgrade() -> None:
    """Add agents.lease_s, .replaced and .replaced_until, attempts.handed_to, jobs.workdir."""
    op.add_column(
        "agents",
        sa.Column("lease_s", sa.Double(), nullable=False, server_default=str(_OLD_LEASE_S)),
    )
    op.add_column("agents", sa.Column("replaced", sa.JSON(), nullable=False, server_default="[]"))
    op.add_column("agents", sa.Column("replaced_until", sa.Double(), nullable=True))
    op.add_column("attempts", sa.Column("handed_to", sa.String(length=128), nullable=True))
    op.add_column("jobs", sa.Column("workdir", sa.Text(), nullable=True))


def downgrade() -> None:
    """Drop the columns again."""
    op.drop_column("jobs", "workdir")
    op.drop_column("attempts", "handed_to")
    op.drop_column("agents", "replaced_until")
    op.drop_column("agents", "replaced")
    op.drop_column("agents", "lease_s")
