"""Serving a version's chunks: many streams read at once from a tree of more files than the
reader keeps open, and every chunk they get is the right one."""

from __future__ import annotations

import random
import threading
from pathlib import Path

from onecluster.storage import SourceReader, scan_tree
from onecluster.transfer import digest


def test_concurrent_reads_of_more_files_than_are_kept_open_get_the_right_bytes(
    tmp_path: Path,
) -> None:
    # An image dataset: 300 small files, one chunk each, read by 8 streams at once.  With two
    # files kept open, streams evict each other's files all the time, as 64 do when a few
    # streams serve 100,000 files under load: an evicted file's descriptor must not be
    # closed while a read uses it (its number would go to the next file opened).
    rng = random.Random(7)
    top = tmp_path / "images"
    top.mkdir()
    for i in range(300):
        (top / f"{i:03}.jpg").write_bytes(rng.randbytes(rng.randint(1000, 4000)))
    manifest = scan_tree(top)
    reader = SourceReader(top, manifest, open_files=2)
    chunks = list(manifest.chunks)
    failures: list[BaseException] = []

    def stream(seed: int) -> None:
        order = random.Random(seed)
        try:
            for _ in range(3):
                for chunk in order.sample(chunks, len(chunks)):
                    assert digest(reader.read(chunk)) == chunk
        except BaseException as exc:  # noqa: BLE001 - collected and reported below
            failures.append(exc)

    threads = [threading.Thread(target=stream, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    reader.close()
    assert digest(reader.read(chunks[0])) == chunks[0]  # a closed reader opens files again
    reader.close()
