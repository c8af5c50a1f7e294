"""Verification of the register a server holds open: the same checks as :func:`verify`,
while batches may be being written, whatever the storage (a directory, the database).

:func:`verify` wants a closed register (an entry past the last signed head is an error
there).  A register in use has such a tail whenever a batch is being written, so this check
reads what its storage holds in the storage's consistent order — no checkpoint read covers
an entry not read — and leaves out the tail no head covers yet.  It checks every signature
under the key the register signs with (not the one the storage records, which could have
been replaced), that the key the storage records is still that key, and that the latest
head the register holds in memory is among the stored heads.
"""

from __future__ import annotations

from onecluster.errors import IntegrityError
from onecluster.register._check import check_log
from onecluster.register._log import Register
from onecluster.register._report import VerifyReport
from onecluster.register._verify import register_report

__all__ = ["verify_open"]


def verify_open(register: Register) -> VerifyReport:
    """Check what the storage of ``register`` (open, possibly appending) holds against its
    signing key.

    Raises :class:`IntegrityError` naming the first entry or checkpoint that does not check
    out, or saying which of the key and the latest head is not what the register holds;
    :class:`StorageError` when the storage cannot be read.
    """
    key = register.public_key()
    latest = register.head()  # before the storage: it must hold at least this head
    entries, checkpoints, stored_key = register.stored()
    checked = check_log(entries, checkpoints, key)
    if latest not in checked.heads:
        msg = (
            f"the register's latest signed tree head (size {latest.size}) is not in "
            f"{register.where}: its checkpoints were cut short or replaced"
        )
        raise IntegrityError(msg, hint="restore the register from its backup")
    if stored_key != key:
        msg = f"the public key (public.key) of {register.where} is not the key it signs with"
        raise IntegrityError(msg, hint="find out who replaced the register's public key")
    return register_report(checked, key)
