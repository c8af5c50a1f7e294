"""The refusals of de-identification, members of the one exception tree (exit 2, HTTP 400).

A refused run writes nothing: its output goes to a temporary file that is renamed into
place only once the whole input has been read (``docs/export.md``).
"""

from __future__ import annotations

from onecluster.errors import ValidationError

__all__ = ["MalformedInputError", "ProfileError"]


class ProfileError(ValidationError):
    """A de-identification profile that is malformed, or names a column the input lacks."""

    code = "profile_invalid"


class MalformedInputError(ValidationError):
    """Input that cannot be read as its format says: a CSV row with the wrong number of
    fields or bad quoting, a line that is not JSON, bytes that are not UTF-8, a Parquet
    file or row group that does not decode.  ``where`` names the place (``line 12``,
    ``row group 3``), and the message says it too."""

    code = "input_malformed"

    def __init__(self, message: str, *, where: str, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.where = where
