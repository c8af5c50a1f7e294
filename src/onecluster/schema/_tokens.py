"""Token bodies: ``POST /tokens`` and its answer (the secret is shown exactly once)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, model_validator

from onecluster.schema._bounds import STRICT, SiteName, TeamName

__all__ = ["Role", "TokenCreate", "TokenOut"]

Role = Literal["admin", "member", "agent"]


class TokenCreate(BaseModel):
    """A token to mint: ``member`` needs ``team``, ``agent`` needs ``site``, ``admin`` neither."""

    model_config = STRICT

    role: Role
    team: TeamName | None = None
    site: SiteName | None = None

    @model_validator(mode="after")
    def _scope_matches_role(self) -> TokenCreate:
        if self.role == "member" and (self.team is None or self.site is not None):
            msg = "a member token needs a team and no site"
            raise ValueError(msg)
        if self.role == "agent" and (self.site is None or self.team is not None):
            msg = "an agent token needs a site and no team"
            raise ValueError(msg)
        if self.role == "admin" and (self.team is not None or self.site is not None):
            msg = "an admin token takes neither a team nor a site"
            raise ValueError(msg)
        return self


class TokenOut(BaseModel):
    """A freshly minted token; ``token`` is the secret, stored only as a hash."""

    token: str
    id: str
    role: Role
    team: str | None
    site: str | None
