"""What :func:`verify` found when everything checked out."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

__all__ = ["VerifyReport"]


@dataclass(frozen=True, slots=True)
class VerifyReport:
    """A verified register or bundle: ``entries_checked`` entries, all covered by the signed
    tree head of ``size`` entries with root ``root`` (hex), under the key whose fingerprint
    (SHA-256 of the raw public key, hex) is ``key_fingerprint``.  A bundle also has its
    ``month`` and the ``first`` and ``last`` seq it holds (``None`` when it holds none)."""

    kind: Literal["register", "bundle"]
    size: int
    root: str
    entries_checked: int
    key_fingerprint: str
    heads_checked: int = 1
    month: str | None = None
    first: int | None = None
    last: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON."""
        return asdict(self)

    def summary(self) -> str:
        """One line for people: ``verified: …``."""
        if self.kind == "register":
            what = f"register of {self.entries_checked} entries, {self.heads_checked} signed heads"
        else:
            seqs = f"seq {self.first}–{self.last}" if self.entries_checked else "no entries"
            what = f"bundle {self.month}: {self.entries_checked} entries ({seqs})"
        return (
            f"verified: {what}; tree head size {self.size}, root {self.root[:16]}…; "
            f"key {self.key_fingerprint[:16]}…"
        )
