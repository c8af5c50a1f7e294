"""Audited exports: approvals, exports, the de-identification scans of exports, and who
holds a token.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-04
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add export_approvals, exports, the scans' export columns and tokens.holder."""
    op.add_column("tokens", sa.Column("holder", sa.String(length=128), nullable=True))
    op.add_column("scans", sa.Column("export_id", sa.String(length=64), nullable=True))
    op.add_column("scans", sa.Column("source_dataset", sa.String(length=64), nullable=True))
    op.add_column("scans", sa.Column("source_root", sa.String(length=64), nullable=True))
    op.add_column("scans", sa.Column("profile", sa.Text(), nullable=True))
    op.add_column("scans", sa.Column("deid", sa.JSON(), nullable=True))
    op.create_table(
        "export_approvals",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column("dataset", sa.String(length=64), nullable=False),
        sa.Column("destinations", sa.JSON(), nullable=False),
        sa.Column("purpose", sa.Text(), nullable=False),
        sa.Column("categories", sa.JSON(), nullable=False),
        sa.Column("personal", sa.Boolean(), nullable=False),
        sa.Column("sensitive", sa.Boolean(), nullable=False),
        sa.Column("route", sa.String(length=32), nullable=False),
        sa.Column("route_ref", sa.Text(), nullable=False),
        sa.Column("profile", sa.Text(), nullable=True),
        sa.Column("requester", sa.String(length=160), nullable=False),
        sa.Column("requester_token", sa.String(length=32), nullable=False),
        sa.Column("approver", sa.String(length=160), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("valid_from", sa.Double(), nullable=False),
        sa.Column("valid_until", sa.Double(), nullable=False),
        sa.Column("max_bytes", sa.BigInteger(), nullable=False),
        sa.Column("max_exports", sa.Integer(), nullable=True),
        sa.Column("bytes_used", sa.BigInteger(), nullable=False),
        sa.Column("exports_used", sa.Integer(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("decided_at", sa.Double(), nullable=True),
    )
    op.create_table(
        "exports",
        sa.Column("id", sa.String(length=64), primary_key=True),
        sa.Column(
            "approval_id",
            sa.String(length=64),
            sa.ForeignKey("export_approvals.id"),
            nullable=False,
        ),
        sa.Column("dataset", sa.String(length=64), nullable=False),
        sa.Column("root", sa.String(length=64), nullable=False),
        sa.Column("src", sa.String(length=64), nullable=False),
        sa.Column("dst", sa.String(length=64), nullable=False),
        sa.Column("requester", sa.String(length=160), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("export_dataset", sa.String(length=64), nullable=False),
        sa.Column("scan_id", sa.String(length=64), nullable=True),
        sa.Column("content_hash", sa.String(length=64), nullable=True),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.BigInteger(), nullable=False),
        sa.Column("individuals", sa.BigInteger(), nullable=False),
        sa.Column("individuals_sensitive", sa.BigInteger(), nullable=False),
        sa.Column("findings", sa.JSON(), nullable=False),
        sa.Column("transfer_id", sa.String(length=64), nullable=True),
        sa.Column("intent_seq", sa.BigInteger(), nullable=True),
        sa.Column("end_seq", sa.BigInteger(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
    )
    op.create_index("ix_exports_state", "exports", ["state"])
    op.create_index("ix_exports_created_at", "exports", ["created_at"])


def downgrade() -> None:
    """Drop them again."""
    op.drop_index("ix_exports_created_at", table_name="exports")
    op.drop_index("ix_exports_state", table_name="exports")
    op.drop_table("exports")
    op.drop_table("export_approvals")
    for column in ("deid", "profile", "source_root", "source_dataset", "export_id"):
        op.drop_column("scans", column)
    op.drop_column("tokens", "holder")
