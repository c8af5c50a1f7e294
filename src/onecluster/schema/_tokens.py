"""Token bodies: ``POST /tokens`` and its answer (the secret is shown exactly once)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from onecluster.schema._bounds import STRICT, SiteName, TeamName

__all__ = ["Role", "TokenCreate", "TokenOut"]

Role = Literal["admin", "member", "agent", "compliance", "auditor"]


class TokenCreate(BaseModel):
    """A token to mint: ``member`` needs ``team``, ``agent`` needs ``site``, ``admin``,
    ``compliance`` (approves exports) and ``auditor`` (reads the register) neither.
    ``holder`` names the person or service holding it: the export register records it, and
    nobody approves an export that they asked for themselves."""

    model_config = STRICT

    role: Role
    team: TeamName | None = None
    site: SiteName | None = None
    holder: Annotated[str, Field(min_length=1, max_length=128)] | None = None

    @model_validator(mode="after")
    def _scope_matches_role(self) -> TokenCreate:
        if self.role == "member" and (self.team is None or self.site is not None):
            msg = "a member token needs a team and no site"
            raise ValueError(msg)
        if self.role == "agent" and (self.site is None or self.team is not None):
            msg = "an agent token needs a site and no team"
            raise ValueError(msg)
        unscoped = ("admin", "compliance", "auditor")
        if self.role in unscoped and (self.team is not None or self.site is not None):
            article = "an" if self.role[0] in "aeiou" else "a"
            msg = f"{article} {self.role} token takes neither a team nor a site"
            raise ValueError(msg)
        return self


class TokenOut(BaseModel):
    """A freshly minted token; ``token`` is the secret, stored only as a hash."""

    token: str
    id: str
    role: Role
    team: str | None
    site: str | None
    holder: str | None = None
