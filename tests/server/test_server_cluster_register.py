"""Opening the cluster's register at server start: a register folder from before is
imported (checked) into an empty database register and signed on with its own key; a folder
holding another chain, or a replica without the register's key, is refused with what to do."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from onecluster.clock import ManualClock
from onecluster.errors import ConflictError, IntegrityError, ValidationError
from onecluster.register import Register, read_public_key, verify
from onecluster.server import copy_register
from onecluster.server._cluster_register import open_register
from onecluster.store import Store

NOVEMBER = 1_795_000_000.0


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store.open(f"sqlite:///{tmp_path / 'state.db'}")


def _folder(directory: Path, count: int) -> bytes:
    """A register folder of ``count`` entries, as a server before this release left it;
    its root."""
    with Register.open(directory, clock=ManualClock(NOVEMBER), group_wait_s=0) as old:
        for n in range(count):
            old.append({"type": "refused", "export": f"x-{n}", "reason": "no approval"})
        return old.root()


def test_a_register_folder_is_imported_into_an_empty_database_and_signed_on_with_its_key(
    store: Store, tmp_path: Path
) -> None:
    folder = tmp_path / "state" / "register"
    root = _folder(folder, 3)
    kept = (folder / "entries.jsonl").read_bytes()
    register = open_register(store, folder, None, ManualClock(NOVEMBER + 60))
    assert register.size == 3 and register.root(3) == root
    assert register.append({"type": "refused", "export": "x-3", "reason": "r"}).seq == 3
    register.close()
    assert (folder / "entries.jsonl").read_bytes() == kept  # kept, never written again
    copy_register(store, tmp_path / "copy")
    report = verify(tmp_path / "copy", public_key=read_public_key(folder / "public.key"))
    assert report.size == 4
    # Started again (or another replica with the same folder copied): nothing imported twice.
    again = open_register(store, folder, None, ManualClock(NOVEMBER + 120))
    assert again.size == 4
    again.close()


def test_a_folder_with_another_chain_is_refused_when_the_database_has_a_register(
    store: Store, tmp_path: Path
) -> None:
    first = tmp_path / "a" / "register"
    open_register(store, first, None, ManualClock(NOVEMBER)).close()
    other = tmp_path / "b" / "register"
    _folder(other, 2)
    shutil.copy(first / "signing.key", tmp_path / "key")
    with pytest.raises(ConflictError, match="not part of the register in the database"):
        open_register(store, other, tmp_path / "key", ManualClock(NOVEMBER))


def test_a_replica_without_the_register_key_or_with_another_is_refused(
    store: Store, tmp_path: Path
) -> None:
    open_register(store, tmp_path / "a" / "register", None, ManualClock(NOVEMBER)).close()
    with pytest.raises(ValidationError, match="no export register signing key") as info:
        open_register(store, tmp_path / "b" / "register", None, ManualClock(NOVEMBER))
    assert "--register-key" in (info.value.hint or "")
    other = tmp_path / "other.key"
    other.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            serialization.Encoding.Raw,
            serialization.PrivateFormat.Raw,
            serialization.NoEncryption(),
        )
    )
    with pytest.raises(IntegrityError, match="is signed with key"):
        open_register(store, tmp_path / "b" / "register", other, ManualClock(NOVEMBER))
    assert not (tmp_path / "b" / "register" / "signing.key").exists()  # nothing was made
