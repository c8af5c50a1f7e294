"""Offline verification of a register directory or a monthly bundle, from the public key.

:func:`verify` tells the two apart by their files (``bundle.json`` makes a bundle) and
raises :class:`IntegrityError` naming the first entry that does not check out.  The key is
the one the auditor pins (``public_key``), or else the directory's own ``public.key``, whose
fingerprint the report carries so it can be compared with a published one.

A register directory must be exactly what the register wrote: every entry covered by a
signed checkpoint (``_check.check_log``), no entry past the last one and no partial line.
A register cut short by a crash has such a tail until it is opened again (opening drops
it), so verify a copy of a register that is closed, or a bundle.
"""

from __future__ import annotations

from pathlib import Path

from onecluster.errors import IntegrityError, NotFoundError
from onecluster.register._bundle_check import verify_bundle
from onecluster.register._check import Checked, check_log, entry_name
from onecluster.register._files import CHECKPOINTS, ENTRIES, PUBLIC_KEY, read_lines
from onecluster.register._keys import fingerprint, parse_public_key, read_public_key
from onecluster.register._report import VerifyReport

__all__ = ["register_report", "verify"]

_CRASH = (
    "a batch cut short by a crash leaves such a tail until the register is opened again; "
    "otherwise it was added by hand"
)


def _key(path: Path, public_key: bytes | None) -> bytes:
    if public_key is not None:
        return parse_public_key(public_key, "the public key given")
    return read_public_key(path / PUBLIC_KEY)


def verify(path: Path, *, public_key: bytes | None = None) -> VerifyReport:
    """Check the register directory or bundle at ``path`` offline; see the module docstring.

    Raises :class:`IntegrityError` naming the first bad entry, :class:`NotFoundError` when
    ``path`` is neither, :class:`ValidationError` for an unreadable public key.
    """
    path = Path(path)
    if (path / "bundle.json").is_file():
        return verify_bundle(path, _key(path, public_key))
    if (path / CHECKPOINTS).is_file() or (path / ENTRIES).is_file():
        return _verify_register(path, _key(path, public_key), pinned=public_key is not None)
    msg = f"{path} is neither an export register (no {CHECKPOINTS}) nor a bundle (no bundle.json)"
    raise NotFoundError(msg)


def _verify_register(path: Path, key: bytes, *, pinned: bool) -> VerifyReport:
    entries = read_lines(path / ENTRIES)
    checkpoints = read_lines(path / CHECKPOINTS)
    checked = check_log(entries.lines, checkpoints.lines, key)
    if not checked.checkpoints:
        msg = f"{path} holds no signed tree head ({CHECKPOINTS} is empty)"
        raise IntegrityError(msg)
    covered = checked.covered
    if len(entries.lines) > covered:
        msg = f"{entry_name(covered)} is not covered by any signed tree head: {_CRASH}"
        raise IntegrityError(msg)
    if entries.torn:
        msg = (
            f"{entry_name(covered)} is a partial line, not covered by any signed tree head: "
            f"{_CRASH}"
        )
        raise IntegrityError(msg)
    if checkpoints.torn:
        msg = f"{CHECKPOINTS} ends in a partial line (line {len(checkpoints.lines) + 1}): {_CRASH}"
        raise IntegrityError(msg)
    if pinned and (path / PUBLIC_KEY).exists() and read_public_key(path / PUBLIC_KEY) != key:
        msg = f"{path / PUBLIC_KEY} is not the pinned public key (every signature checked out)"
        raise IntegrityError(msg, hint="find out who replaced public.key")
    return register_report(checked, key)


def register_report(checked: Checked, key: bytes) -> VerifyReport:
    """The report of a register whose entries ``checked`` covers, under ``key``."""
    head = checked.heads[-1]
    return VerifyReport(
        kind="register",
        size=head.size,
        root=head.root.hex(),
        entries_checked=checked.covered,
        key_fingerprint=fingerprint(key),
        heads_checked=len(checked.checkpoints),
    )
