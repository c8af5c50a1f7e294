"""Checkpoints: what a job declares about saving its state (jobs.checkpoint_interval_s and
.checkpoint_on_sigterm), and which attempts were stopped by a preemption
(attempts.preempted), so that reports can count the work preemption lost.

Jobs from before this revision declared nothing (NULL, false); their attempts count as not
preempted (false): which of them were is not known.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add jobs.checkpoint_interval_s, jobs.checkpoint_on_sigterm and attempts.preempted."""
    op.add_column("jobs", sa.Column("checkpoint_interval_s", sa.Double(), nullable=True))
    op.add_column(
        "jobs",
        sa.Column("checkpoint_on_sigterm", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column(
        "attempts",
        sa.Column("preempted", sa.Boolean(), nullable=False, server_default=sa.false()),
    )


def downgrade() -> None:
    """Drop the columns again."""
    op.drop_column("attempts", "preempted")
    op.drop_column("jobs", "checkpoint_on_sigterm")
    op.drop_column("jobs", "checkpoint_interval_s")
