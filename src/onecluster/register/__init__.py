"""The export register: a durable, tamper-evident log of every export, its monthly bundle
for regulators, and the offline verifier (``docs/export.md``, "The export register").

* :class:`Register` — an append-only RFC 9162 log of canonical JSON entries in one
  directory; :meth:`Register.append` returns once the entry is fsync'd and covered by an
  Ed25519-signed checkpoint (:class:`SignedHead`), batching concurrent appenders.
* :func:`write_bundle` — one month's entries with inclusion proofs, the signed head, a
  consistency proof from the previous month's last head, a signed header, and views for
  people (CSV, JSON, printable HTML).
* :func:`verify` — checks a register directory or a bundle offline from the public key
  alone, and names the first entry that does not check out; :func:`verify_open` checks
  the register a server holds open, as it appends.
* :class:`LogStorage` — where a register is kept: a directory (:meth:`Register.open`) or
  anything else that satisfies it, such as the database (:meth:`Register.open_on`);
  :func:`read_directory` and :func:`write_directory` move a register between the two.
"""

from onecluster.register._bundle import BundleSummary, write_bundle
from onecluster.register._directory import DirectoryLog, read_directory, write_directory
from onecluster.register._head import Receipt, SignedHead
from onecluster.register._keys import (
    create_key_pair,
    fingerprint,
    load_signing_key,
    public_bytes,
    read_public_key,
)
from onecluster.register._live import verify_open
from onecluster.register._log import Register
from onecluster.register._report import VerifyReport
from onecluster.register._storage import LogStorage
from onecluster.register._verify import verify

__all__ = [
    "BundleSummary",
    "DirectoryLog",
    "LogStorage",
    "Receipt",
    "Register",
    "SignedHead",
    "VerifyReport",
    "create_key_pair",
    "fingerprint",
    "load_signing_key",
    "public_bytes",
    "read_directory",
    "read_public_key",
    "verify",
    "verify_open",
    "write_bundle",
    "write_directory",
]
