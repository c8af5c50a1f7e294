"""Datasets and where replicas of them live."""

from __future__ import annotations

from dataclasses import dataclass

from onecluster.model._checks import (
    MAX_DATASET_BYTES,
    check_at_most,
    check_name,
    check_non_negative,
)

__all__ = ["Dataset"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dataset:
    """A named dataset of ``size_bytes``, with complete replicas at ``sites``."""

    name: str
    size_bytes: int
    sites: frozenset[str]

    def __post_init__(self) -> None:
        check_name("dataset", self.name)
        check_non_negative(f"size of dataset {self.name}", self.size_bytes)
        check_at_most(f"size of dataset {self.name} in bytes", self.size_bytes, MAX_DATASET_BYTES)
        object.__setattr__(self, "sites", frozenset(self.sites))
