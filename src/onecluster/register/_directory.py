"""A register directory read whole, to move it elsewhere (into the database), and written
back from whatever holds a register (a copy of the database's, for :func:`verify`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from onecluster.errors import ConflictError, StorageError
from onecluster.register._file_log import FileLog
from onecluster.register._files import CHECKPOINTS, ENTRIES, PUBLIC_KEY, fsync_directory
from onecluster.register._head import SignedHead
from onecluster.register._log import DEFAULT_ORIGIN

__all__ = ["DirectoryLog", "read_directory", "write_directory"]


@dataclass(frozen=True, slots=True)
class DirectoryLog:
    """What a register directory holds, checked: its key, entries and checkpoint lines."""

    key: Ed25519PrivateKey
    entries: list[bytes]
    checkpoints: list[bytes]
    head: SignedHead

    @property
    def size(self) -> int:
        """How many entries its last signed head covers."""
        return self.head.size


def read_directory(directory: Path, *, origin: str = DEFAULT_ORIGIN) -> DirectoryLog | None:
    """The register in ``directory``, opened as :meth:`Register.open` opens it (locked,
    checked, a crash's tail repaired), or ``None`` when it holds no checkpoint (none was
    ever written there).  Raises what :meth:`Register.open` raises."""
    lines_path = Path(directory) / CHECKPOINTS
    if not lines_path.is_file() or lines_path.stat().st_size == 0:
        return None
    storage, recovered = FileLog.open(Path(directory), origin)
    try:
        entries, checkpoints = storage.load()
    finally:
        storage.close()
    return DirectoryLog(recovered.key, entries, checkpoints, recovered.checked.heads[-1])


def write_directory(
    directory: Path, public_key: bytes, entries: list[bytes], checkpoints: list[bytes]
) -> None:
    """Write a register directory of ``entries`` and ``checkpoints`` (and ``public.key``)
    into ``directory``, which must be new or empty (:class:`ConflictError`), for
    :func:`verify` to check offline.  Nothing is checked here: that is the verifier's job."""
    directory = Path(directory)
    if directory.exists() and any(directory.iterdir()):
        msg = f"{directory} is not empty"
        raise ConflictError(msg, hint="name a new folder")
    pem = Ed25519PublicKey.from_public_bytes(public_key).public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    try:
        directory.mkdir(parents=True, exist_ok=True)
        (directory / ENTRIES).write_bytes(b"".join(e + b"\n" for e in entries))
        (directory / CHECKPOINTS).write_bytes(b"".join(c + b"\n" for c in checkpoints))
        (directory / PUBLIC_KEY).write_bytes(pem)
        fsync_directory(directory)
    except OSError as exc:
        msg = f"cannot write the register copy in {directory}: {exc.strerror or exc}"
        raise StorageError(msg) from exc
