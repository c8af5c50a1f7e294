"""The fabric in force, in the database: its versions, the drained sites and pools, and one
row every replica reads to see either change.

``fabrics`` keeps every version of the fabric file as applied (its YAML text, never a
pickle), with who applied it and when; the newest is in force.  ``drains`` lists the sites
(``gpu_type`` empty) and pools that take no new work.  ``fabric_epoch`` (one row) holds the
version in force and an epoch that grows with every change of either.  A database from
before this revision has no fabric yet: the first server to start on it stores its
``--fabric`` file as version 1.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create fabrics, drains and fabric_epoch (with its row: no version, epoch 0)."""
    op.create_table(
        "fabrics",
        sa.Column("version", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("applied_at", sa.Double(), nullable=False),
        sa.Column("applied_by", sa.String(256), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
    )
    op.create_table(
        "drains",
        sa.Column("site", sa.String(64), primary_key=True),
        sa.Column("gpu_type", sa.String(64), primary_key=True),
        sa.Column("since", sa.Double(), nullable=False),
        sa.Column("by", sa.String(256), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
    )
    epoch = op.create_table(
        "fabric_epoch",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(epoch, [{"id": 1, "version": 0, "epoch": 0}])


def downgrade() -> None:
    """Drop the three tables."""
    op.drop_table("fabric_epoch")
    op.drop_table("drains")
    op.drop_table("fabrics")
