"""The export register in the database: ``register_entries`` (seq → canonical JSON bytes),
``register_checkpoints`` (position → signed checkpoint line) and ``register_head`` (one row,
id 1: the public key and the counts, locked by every writer).  The head row starts with no
key and nothing written; the first server of this version on the database fills it — from
its state folder's register when it has one (``docs/operations.md``).

Expand-only: an older server never reads or writes these tables (it keeps its register in
its state folder, as before), so replicas can be upgraded one at a time.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the register's three tables and the empty head row."""
    head = op.create_table(
        "register_head",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("public_key", sa.LargeBinary(), nullable=True),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("checkpoints", sa.BigInteger(), nullable=False),
    )
    op.create_table(
        "register_entries",
        sa.Column("seq", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
    )
    op.create_table(
        "register_checkpoints",
        sa.Column("position", sa.BigInteger(), primary_key=True, autoincrement=False),
        sa.Column("line", sa.LargeBinary(), nullable=False),
    )
    op.bulk_insert(head, [{"id": 1, "public_key": None, "size": 0, "checkpoints": 0}])


def downgrade() -> None:
    """Drop the register's tables (the register's entries with them)."""
    op.drop_table("register_checkpoints")
    op.drop_table("register_entries")
    op.drop_table("register_head")
