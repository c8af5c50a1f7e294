"""Tokens as users paste them: surrounding whitespace dropped, anything else odd refused.

A token travels in the ``Authorization: Bearer`` header, where a space, a line break or any
other control character either splits the header or is refused by the HTTP library, which
would surface as "cannot reach the server".  Tokens are printable ASCII without spaces
(``oc_`` and URL-safe base64 when minted by onecluster; RFC 6750's b64token is a subset).
"""

from __future__ import annotations

from onecluster.errors import AuthError

__all__ = ["usable_token"]

_FIRST_PRINTABLE, _LAST_PRINTABLE = 0x21, 0x7E


def usable_token(token: str, *, source: str = "the token") -> str:
    """``token`` without surrounding whitespace (a file's newline, a pasted CRLF).

    Raises :class:`AuthError` naming ``source`` (e.g. ``"$ONECLUSTER_TOKEN"``), never the
    secret itself, when what is left is empty or holds a space, a control character or a
    character outside ASCII.
    """
    stripped = token.strip()
    if not stripped:
        msg = f"{source} is empty or only whitespace"
        raise AuthError(msg, hint=_HINT)
    for position, char in enumerate(stripped, start=1):
        if not _FIRST_PRINTABLE <= ord(char) <= _LAST_PRINTABLE:
            msg = f"{source} is malformed: character {position} is {_describe(char)}"
            raise AuthError(msg, hint=_HINT)
    return stripped


_HINT = "a token is one word of printable ASCII (oc_…); copy it again from where it was minted"


def _describe(char: str) -> str:
    if char.isspace():
        return "a space" if char == " " else f"whitespace ({char!r})"
    if ord(char) < 0x20 or ord(char) == 0x7F:
        return f"a control character ({char!r})"
    return f"not ASCII ({char!r})"
