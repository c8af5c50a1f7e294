"""Option types shared by several commands."""

from __future__ import annotations

import enum

__all__ = ["Policy", "Role"]


class Policy(enum.StrEnum):
    """The scheduling policies (see ``docs/scheduler.md``): onecluster's, and two baselines."""

    UNIFIED = "unified"
    SEPARATE = "separate"
    FIFO = "fifo"


class Role(enum.StrEnum):
    """The roles a token can carry."""

    ADMIN = "admin"
    MEMBER = "member"
    AGENT = "agent"
