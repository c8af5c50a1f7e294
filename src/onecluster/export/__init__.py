"""Audited exports (pure parts): the register's Merkle tree and de-identification."""

from onecluster.export import merkle

__all__ = ["merkle"]
