"""What cluster backends report beyond running or not: a site's problem, the times a job
really ran under the site's cluster manager, and the expected start of work it queues.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add agents.problem, attempts.ran_from/ran_until and jobs.expected_start_at."""
    op.add_column("agents", sa.Column("problem", sa.Text(), nullable=True))
    op.add_column("attempts", sa.Column("ran_from", sa.Double(), nullable=True))
    op.add_column("attempts", sa.Column("ran_until", sa.Double(), nullable=True))
    op.add_column("jobs", sa.Column("expected_start_at", sa.Double(), nullable=True))


def downgrade() -> None:
    """Drop the columns again."""
    op.drop_column("jobs", "expected_start_at")
    op.drop_column("attempts", "ran_until")
    op.drop_column("attempts", "ran_from")
    op.drop_column("agents", "problem")
