"""Attempts that wait for their dataset: the transfer they wait for, the dataset's directory
at their site, and when it was complete there.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add attempts.data_wait, .dataset_dir and .data_ready_at."""
    op.add_column("attempts", sa.Column("data_wait", sa.String(length=64), nullable=True))
    op.add_column("attempts", sa.Column("dataset_dir", sa.Text(), nullable=True))
    op.add_column("attempts", sa.Column("data_ready_at", sa.Double(), nullable=True))


def downgrade() -> None:
    """Drop the columns again."""
    op.drop_column("attempts", "data_ready_at")
    op.drop_column("attempts", "dataset_dir")
    op.drop_column("attempts", "data_wait")
