"""Initial schema: jobs, attempts, tokens, agents, job logs, events.

Revision ID: 0001
Revises:
Create Date: 2026-05-20
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create every table of the first schema version."""
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(64), primary_key=True),
        sa.Column("name", sa.String(128), nullable=False),
        sa.Column("team", sa.String(64), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("gpu_types", sa.JSON(), nullable=False),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("dataset", sa.String(64), nullable=True),
        sa.Column("dataset_bytes", sa.BigInteger(), nullable=False),
        sa.Column("priority", sa.Integer(), nullable=False),
        sa.Column("preemptible", sa.Boolean(), nullable=False),
        sa.Column("command", sa.JSON(), nullable=False),
        sa.Column("max_sites", sa.Integer(), nullable=False),
        sa.Column("submitted_at", sa.Double(), nullable=False),
        sa.Column("queued_at", sa.Double(), nullable=False),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("preemptions", sa.Integer(), nullable=False),
        sa.Column("borrowed", sa.Boolean(), nullable=False),
        sa.Column("parts", sa.JSON(), nullable=False),
        sa.Column("log_size", sa.Integer(), nullable=False),
    )
    op.create_index("ix_jobs_team", "jobs", ["team"])
    op.create_index("ix_jobs_state", "jobs", ["state"])
    op.create_index("ix_jobs_submitted_at", "jobs", ["submitted_at"])

    op.create_table(
        "attempts",
        sa.Column("id", sa.String(96), primary_key=True),
        sa.Column("job_id", sa.String(64), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("run", sa.Integer(), nullable=False),
        sa.Column("site", sa.String(64), nullable=False),
        sa.Column("gpu_type", sa.String(64), nullable=False),
        sa.Column("gpus", sa.Integer(), nullable=False),
        sa.Column("parts", sa.JSON(), nullable=False),
        sa.Column("state", sa.String(16), nullable=False),
        sa.Column("stop_reason", sa.Text(), nullable=True),
        sa.Column("exit_code", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.Double(), nullable=False),
        sa.Column("finished_at", sa.Double(), nullable=True),
        sa.Column("borrowed", sa.Boolean(), nullable=False),
        sa.Column("preemptible", sa.Boolean(), nullable=False),
        sa.Column("waited_s", sa.Double(), nullable=False),
        sa.Column("cost_per_gpu_hour", sa.Double(), nullable=False),
        sa.Column("cost", sa.Double(), nullable=False),
        sa.Column("log_size", sa.Integer(), nullable=False),
    )
    op.create_index("ix_attempts_job_id", "attempts", ["job_id"])
    op.create_index("ix_attempts_state", "attempts", ["state"])
    op.create_index("ix_attempts_site_state", "attempts", ["site", "state"])

    op.create_table(
        "tokens",
        sa.Column("id", sa.String(32), primary_key=True),
        sa.Column("role", sa.String(16), nullable=False),
        sa.Column("team", sa.String(64), nullable=True),
        sa.Column("site", sa.String(64), nullable=True),
        sa.Column("sha256", sa.String(64), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked", sa.Boolean(), nullable=False),
        sa.UniqueConstraint("sha256"),
    )

    op.create_table(
        "agents",
        sa.Column("site", sa.String(64), primary_key=True),
        sa.Column("agent_id", sa.String(128), nullable=False),
        sa.Column("backend", sa.String(32), nullable=False),
        sa.Column("last_heartbeat", sa.Double(), nullable=False),
        sa.Column("capacity", sa.JSON(), nullable=False),
        sa.Column("down", sa.Boolean(), nullable=False),
    )

    op.create_table(
        "job_logs",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("job_id", sa.String(64), sa.ForeignKey("jobs.id"), nullable=False),
        sa.Column("attempt_id", sa.String(96), nullable=False),
        sa.Column("offset", sa.BigInteger(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
    )
    op.create_index("ix_job_logs_job_offset", "job_logs", ["job_id", "offset"])

    op.create_table(
        "events",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("time", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("job_id", sa.String(64), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
    )
    op.create_index("ix_events_time", "events", ["time"])
    op.create_index("ix_events_job_id", "events", ["job_id"])


def downgrade() -> None:
    """Drop every table (the data goes with them)."""
    for table in ("events", "job_logs", "agents", "tokens", "attempts", "jobs"):
        op.drop_table(table)
