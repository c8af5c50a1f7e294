"""A site's dataset storage: the index, the manifests, and the replicas it holds.

``<data-dir>/index.sqlite`` is the index (:mod:`onecluster.storage._index`);
``<data-dir>/manifests/<root>.ocm.zst`` keeps every manifest the site has scanned or
received (zstd-compressed, format 1), so that a restarted agent serves and resumes without
rescanning; received replicas live in ``<data-dir>/<dataset>/<root>``.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import zstandard

from onecluster.errors import IntegrityError, NotFoundError, StorageError
from onecluster.storage._index import ChunkIndex, ReplicaRecord
from onecluster.storage._replica import PartialReplica
from onecluster.storage._source import SourceReader
from onecluster.transfer import Manifest, decode_manifest, encode_manifest

__all__ = ["DataStore"]


class DataStore:
    """The dataset storage of one agent, under ``data_dir``."""

    def __init__(self, data_dir: Path, *, site: str = "this site") -> None:
        self.dir = data_dir
        self._site = site
        self._manifests = data_dir / "manifests"
        try:
            self._manifests.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            msg = f"cannot create the data directory {data_dir}: {exc.strerror}"
            raise StorageError(msg) from exc
        self.index = ChunkIndex(data_dir / "index.sqlite")
        self._lock = threading.Lock()
        self._cache: dict[bytes, Manifest] = {}

    def close(self) -> None:
        self.index.close()

    # -- manifests --------------------------------------------------------------------------

    def save_manifest(self, manifest: Manifest) -> None:
        """Keep ``manifest`` (written to a temporary file, then renamed into place)."""
        target = self._manifests / f"{manifest.root_hex}.ocm.zst"
        if target.exists():
            return
        data = zstandard.ZstdCompressor(level=3).compress(encode_manifest(manifest))
        temporary = target.with_suffix(f".tmp{os.getpid()}")
        try:
            temporary.write_bytes(data)
            temporary.replace(target)
        except OSError as exc:
            raise StorageError(f"cannot keep the manifest in {target}: {exc.strerror}") from exc
        with self._lock:
            self._cache[manifest.root] = manifest

    def manifest(self, root: bytes) -> Manifest | None:
        """The kept manifest of version ``root``, checked against it; ``None`` if none."""
        with self._lock:
            cached = self._cache.get(root)
        if cached is not None:
            return cached
        path = self._manifests / f"{root.hex()}.ocm.zst"
        try:
            data = zstandard.ZstdDecompressor().decompress(path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, zstandard.ZstdError) as exc:
            msg = f"the kept manifest {path} cannot be read: {exc}"
            raise IntegrityError(msg) from exc
        manifest = decode_manifest(data, root=root)
        with self._lock:
            if len(self._cache) >= 16:
                self._cache.clear()
            self._cache[root] = manifest
        return manifest

    # -- replicas ---------------------------------------------------------------------------

    def register(self, dataset: str, directory: Path, manifest: Manifest) -> None:
        """Record a scanned directory as a complete replica of ``manifest``, in place.  An
        earlier version scanned in the same directory is no longer there: it is forgotten."""
        self.save_manifest(manifest)
        for old in self.index.replicas():
            if old.in_place and old.dir == directory and old.root != manifest.root:
                self.index.drop_replica(old.dataset, old.root)
        self.index.drop_replica(dataset, manifest.root)
        self.index.put_replica(
            dataset,
            manifest.root,
            directory,
            complete=True,
            in_place=True,
            bytes_present=manifest.bytes_total,
        )
        self.index.add_chunks(dataset, manifest.root, manifest.places())

    def replicas(self) -> list[ReplicaRecord]:
        return self.index.replicas()

    def reader(self, dataset: str, root: bytes) -> SourceReader:
        """A reader of the complete replica of ``(dataset, root)`` held here.

        Raises :class:`NotFoundError` when the site holds no complete replica of it."""
        record = self.index.replica(dataset, root)
        manifest = self.manifest(root)
        if record is None or not record.complete or manifest is None:
            msg = f"{self._site} holds no complete replica of {dataset} version {root.hex()[:16]}"
            raise NotFoundError(msg)
        return SourceReader(record.dir, manifest, site=self._site)

    def receive(self, dataset: str, manifest: Manifest) -> PartialReplica:
        """The partial replica a transfer of ``manifest`` writes into (not opened yet)."""
        self.save_manifest(manifest)
        return PartialReplica(self.index, self.dir, dataset, manifest)
