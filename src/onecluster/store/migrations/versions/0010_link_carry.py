"""The link board a leader hands to the next one: ``link_carry``, one row (id 1) with the
latest carry as JSON — each circuit's state and flap damping, the route table's version —
and when it was written, by the database's clock.  The row starts empty: the first leader on
a database, or on one from before this revision, starts its links afresh, as before.

Both versions of the server accept the database after this revision (an old one never reads
or writes the new table), so replicas can be upgraded one at a time.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create link_carry with its empty row."""
    carry = op.create_table(
        "link_carry",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("written_at", sa.Double(), nullable=False),
    )
    op.bulk_insert(carry, [{"id": 1, "body": "", "written_at": 0.0}])


def downgrade() -> None:
    """Drop link_carry."""
    op.drop_table("link_carry")
