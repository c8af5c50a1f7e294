"""The cluster's one export register, in the database: opening it at server start, and
copying it out as a register directory for ``onecluster export verify``.

**The signing key** is a file every replica is given, never a row: ``--register-key FILE``,
or else ``<state-dir>/register/signing.key``.  The database keeps only the public key, fixed
by the first replica that writes (decision 180).  The first replica on an empty database
with no key file makes one there; any other replica must be given a copy — one without, or
with another key, refuses every export (503) with a message that says which key the
register is signed with.

**A register folder from before** (``<state-dir>/register``, where a server kept its
register until the register moved into the database) is never lost (decision 181): on a
database whose register is empty it is imported whole — checked as ``export verify``
checks it, its crash tail repaired — and its own key signs on; the folder is kept as it is
and never written again.  On a database whose register holds entries already, the folder
must be a prefix of that chain (an import made before, by this replica or another); a folder
that is not — the separate chain an old replica kept after a change of leader — makes this
replica refuse exports until it is moved aside.
"""

from __future__ import annotations

import logging
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onecluster.clock import Clock
from onecluster.errors import ConflictError, IntegrityError, NotFoundError, ValidationError
from onecluster.register import (
    Register,
    create_key_pair,
    fingerprint,
    load_signing_key,
    public_bytes,
    read_directory,
    write_directory,
)
from onecluster.store import Store

__all__ = ["copy_register", "open_register"]

_log = logging.getLogger("onecluster.export")

#: The key's file name in a register folder.
_SIGNING_KEY = "signing.key"


def open_register(store: Store, folder: Path, key_file: Path | None, clock: Clock) -> Register:
    """The register in ``store``'s database, signed with the key in ``key_file`` (default:
    ``folder/signing.key``), after importing ``folder``'s register into an empty one; see
    the module docstring.  Raises :mod:`onecluster.errors` classes saying what to do."""
    log = store.register_log()
    empty = not log.tail(0, 0)[1]
    old = read_directory(folder)
    if old is not None and empty:
        try:
            store.import_register(public_bytes(old.key), old.entries, old.checkpoints)
        except ConflictError:  # another replica wrote first: the folder must be in its chain
            empty = False
    if old is not None and empty:
        _log.warning(
            "the export register in %s (%d entries) was imported into the database, which "
            "every replica appends to from now on; the folder is kept and no longer written",
            folder,
            old.size,
        )
    key = _signing_key(store, folder, key_file)
    public = public_bytes(key)
    claimed = store.claim_register_key(public)
    if claimed != public:
        msg = (
            f"the export register in the database is signed with key {fingerprint(claimed)[:16]}…, "
            f"not with this replica's {_key_path(folder, key_file)} ({fingerprint(public)[:16]}…)"
        )
        raise IntegrityError(
            msg, hint="give every replica the same key file (--register-key); a new key would fork"
        )
    register = Register.open_on(log, key, clock=clock)
    if old is not None and not empty:
        _check_folder_is_in(register, folder, old.size, old.head.root)
    return register


def _key_path(folder: Path, key_file: Path | None) -> Path:
    return key_file if key_file is not None else folder / _SIGNING_KEY


def _signing_key(store: Store, folder: Path, key_file: Path | None) -> Ed25519PrivateKey:
    path = _key_path(folder, key_file)
    if path.exists():
        return load_signing_key(path)
    stored = store.register_key()
    if key_file is not None or stored is not None:
        signed = (
            f"; the register in the database is signed with key {fingerprint(stored)[:16]}…"
            if stored is not None
            else ""
        )
        msg = f"this replica has no export register signing key at {path}{signed}"
        raise ValidationError(
            msg,
            hint=(
                "copy signing.key from the replica that made it (its <state-dir>/register/) "
                "and give it with --register-key"
            ),
        )
    folder.mkdir(parents=True, exist_ok=True)
    create_key_pair(folder)
    _log.info("made the export register's signing key %s: give a copy to every replica", path)
    return load_signing_key(path)


def _check_folder_is_in(register: Register, folder: Path, size: int, root: bytes) -> None:
    """The folder's chain is a prefix of the database's, or the folder is refused."""
    if size <= register.size and register.root(size) == root:
        return
    msg = (
        f"the export register folder {folder} holds a chain of {size} entries that is not part "
        "of the register in the database (it was written apart, e.g. by an older server after "
        "a change of leader)"
    )
    raise ConflictError(
        msg,
        hint=(
            f"keep it (`onecluster export verify {folder}` still checks it), move it out of the "
            "state folder, and start again"
        ),
    )


def copy_register(store: Store, out: Path) -> int:
    """Write the register in ``store``'s database into ``out`` (new or empty) as a register
    directory — its entries and checkpoint lines byte for byte, and its public key — which
    ``onecluster export verify`` checks offline exactly as it checks a register folder; how
    many entries it holds.  Nothing is checked here: tampered rows are copied as they are."""
    public = store.register_key()
    if public is None:
        msg = "the database holds no export register yet (no server has opened it)"
        raise NotFoundError(msg)
    entries, lines = store.register_log().load()
    write_directory(out, public, entries, lines)
    return len(entries)
