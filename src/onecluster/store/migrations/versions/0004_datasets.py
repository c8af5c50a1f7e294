"""Datasets as content: registered datasets, their versions, the replicas each site holds,
scans of directories at sites and transfers between sites; where each agent's data plane
takes connections.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_VERSION = (["dataset", "root"], ["dataset_versions.dataset", "dataset_versions.root"])


def upgrade() -> None:
    """Create datasets, dataset_versions, replicas, scans and transfers; add
    agents.data_address and agents.data_port."""
    op.add_column("agents", sa.Column("data_address", sa.String(15), nullable=True))
    op.add_column("agents", sa.Column("data_port", sa.Integer(), nullable=True))

    op.create_table(
        "datasets",
        sa.Column("name", sa.String(64), primary_key=True),
        sa.Column("created_at", sa.Double(), nullable=False),
    )

    op.create_table(
        "dataset_versions",
        sa.Column("dataset", sa.String(64), sa.ForeignKey("datasets.name"), primary_key=True),
        sa.Column("root", sa.String(64), primary_key=True),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.BigInteger(), nullable=False),
        sa.Column("chunks", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("site", sa.String(64), nullable=False),
    )
    op.create_index("ix_dataset_versions_created_at", "dataset_versions", ["created_at"])

    op.create_table(
        "replicas",
        sa.Column("dataset", sa.String(64), primary_key=True),
        sa.Column("root", sa.String(64), primary_key=True),
        sa.Column("site", sa.String(64), primary_key=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("bytes_present", sa.BigInteger(), nullable=False),
        sa.Column("path", sa.Text(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.ForeignKeyConstraint(*_VERSION),
    )

    op.create_table(
        "scans",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("dataset", sa.String(64), sa.ForeignKey("datasets.name"), nullable=False),
        sa.Column("site", sa.String(64), nullable=False),
        sa.Column("path", sa.Text(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("files_done", sa.BigInteger(), nullable=False),
        sa.Column("bytes_done", sa.BigInteger(), nullable=False),
        sa.Column("files_total", sa.BigInteger(), nullable=True),
        sa.Column("bytes_total", sa.BigInteger(), nullable=True),
        sa.Column("root", sa.String(64), nullable=True),
        sa.Column("new_version", sa.Boolean(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
    )
    op.create_index("ix_scans_dataset", "scans", ["dataset"])
    op.create_index("ix_scans_site_state", "scans", ["site", "state"])

    op.create_table(
        "transfers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("dataset", sa.String(64), nullable=False),
        sa.Column("root", sa.String(64), nullable=False),
        sa.Column("src", sa.String(64), nullable=False),
        sa.Column("dst", sa.String(64), nullable=False),
        sa.Column("reason", sa.String(16), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("bytes_total", sa.BigInteger(), nullable=False),
        sa.Column("bytes_done", sa.BigInteger(), nullable=False),
        sa.Column("bytes_sent", sa.BigInteger(), nullable=False),
        sa.Column("bytes_local", sa.BigInteger(), nullable=False),
        sa.Column("chunks_total", sa.BigInteger(), nullable=False),
        sa.Column("chunks_done", sa.BigInteger(), nullable=False),
        sa.Column("chunks_sent", sa.BigInteger(), nullable=False),
        sa.Column("paths", sa.JSON(), nullable=False),
        sa.Column("rate_bps", sa.Double(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("ticket", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.ForeignKeyConstraint(*_VERSION),
    )
    op.create_index("ix_transfers_state", "transfers", ["state"])
    op.create_index("ix_transfers_created_at", "transfers", ["created_at"])


def downgrade() -> None:
    """Drop the tables and columns again (the data goes with them)."""
    for table in ("transfers", "scans", "replicas", "dataset_versions", "datasets"):
        op.drop_table(table)
    op.drop_column("agents", "data_port")
    op.drop_column("agents", "data_address")
