"""Verification of the register a server holds open: the same checks as :func:`verify`,
while batches may be being written.

:func:`verify` wants a closed register (an entry past the last signed head is an error
there).  A register in use has such a tail whenever a batch is being written, so this check
reads the checkpoints first and the entries second — a checkpoint is written after the
entries it covers are durable, so every head read covers entries already on disk — and
leaves out the tail no head covers yet.  It checks every signature under the key the
register signs with (not the one on disk, which could have been replaced), that the
``public.key`` on disk is still that key, and that the latest head the register holds in
memory is among the heads on disk.
"""

from __future__ import annotations

from onecluster.errors import IntegrityError
from onecluster.register._check import check_log
from onecluster.register._files import CHECKPOINTS, ENTRIES, PUBLIC_KEY, read_lines
from onecluster.register._keys import read_public_key
from onecluster.register._log import Register
from onecluster.register._report import VerifyReport
from onecluster.register._verify import register_report

__all__ = ["verify_open"]


def verify_open(register: Register) -> VerifyReport:
    """Check the files of ``register`` (open, possibly appending) against its signing key.

    Raises :class:`IntegrityError` naming the first entry or checkpoint that does not check
    out, or saying which of the key and the latest head is not what the register holds;
    :class:`StorageError` when the files cannot be read.
    """
    directory = register.directory
    key = register.public_key()
    latest = register.head()  # before the files: the files must hold at least this head
    checkpoints = read_lines(directory / CHECKPOINTS)
    entries = read_lines(directory / ENTRIES)
    checked = check_log(entries.lines, checkpoints.lines, key)
    if latest not in checked.heads:
        msg = (
            f"the register's latest signed tree head (size {latest.size}) is not in "
            f"{directory / CHECKPOINTS}: the file was truncated or replaced"
        )
        raise IntegrityError(msg, hint="restore the register from its backup")
    if read_public_key(directory / PUBLIC_KEY) != key:
        msg = f"{directory / PUBLIC_KEY} is not the key the register signs with"
        raise IntegrityError(msg, hint="find out who replaced public.key")
    return register_report(checked, key)
