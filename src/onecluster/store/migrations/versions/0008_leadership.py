"""Server replicas: the leadership lease (one row), the servers seen, and the queue's epoch.

``leadership`` holds the one lease every replica competes for: its ``term`` (the fencing
token: it grows by one at every change of leader), who holds it, the URL it serves on and
when the lease ends by the database's clock.  ``servers`` lists the server processes
(replicas of the control plane) seen lately.  ``queue_epoch`` grows whenever a transaction
puts a job back in the pending queue or takes one out other than by starting it, so that the
leader notices what another replica did.  The leadership row starts vacant (term 0,
expired), so the first replica to start leads.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create leadership (with its vacant row), servers and queue_epoch (with its row)."""
    leadership = op.create_table(
        "leadership",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("term", sa.BigInteger(), nullable=False),
        sa.Column("holder", sa.String(64), nullable=True),
        sa.Column("url", sa.String(2048), nullable=True),
        sa.Column("since", sa.Double(), nullable=False),
        sa.Column("expires_at", sa.Double(), nullable=False),
    )
    vacant = {"id": 1, "term": 0, "holder": None, "url": None, "since": 0.0, "expires_at": 0.0}
    op.bulk_insert(leadership, [vacant])
    op.create_table(
        "servers",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("url", sa.String(2048), nullable=True),
        sa.Column("version", sa.String(32), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("seen_at", sa.Double(), nullable=False),
    )
    queue = op.create_table(
        "queue_epoch",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=False),
        sa.Column("epoch", sa.BigInteger(), nullable=False),
    )
    op.bulk_insert(queue, [{"id": 1, "epoch": 0}])


def downgrade() -> None:
    """Drop the three tables."""
    op.drop_table("queue_epoch")
    op.drop_table("servers")
    op.drop_table("leadership")
