"""The dashboard's own check of the export register (``server/dashboard/verify.js``), run
under Node against the register's Python code: the same roots, and signatures verified or
refused as the ``cryptography`` package does.  Skipped where there is no ``node``."""

from __future__ import annotations

import base64
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

from onecluster.export.merkle import root
from onecluster.register import SignedHead

VERIFY_JS = Path(__file__).resolve().parents[2] / "src/onecluster/server/dashboard/verify.js"

_HARNESS = """
import { checkRegister, merkleRoot, hex } from "%s";
const cases = JSON.parse(process.argv[2]);
const out = cases.roots.map((entries) => hex(merkleRoot(entries)));
const checks = cases.heads.map(([head, entries]) => checkRegister(head, entries));
console.log(JSON.stringify({ roots: out, checks }));
"""


def _node(tmp_path: Path, cases: object) -> dict[str, list[object]]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed: the dashboard's register check runs in browsers only")
    harness = tmp_path / "harness.mjs"
    harness.write_text(_HARNESS % VERIFY_JS.as_uri())
    command = [node, str(harness), json.dumps(cases)]
    done = subprocess.run(command, check=False, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    result: dict[str, list[object]] = json.loads(done.stdout)
    return result


def _entries(n: int) -> list[str]:
    return [json.dumps({"seq": i, "dataset": f"ds-{i}", "note": "出境 ✓"}) for i in range(n)]


def _head(entries: list[str], key: Ed25519PrivateKey) -> dict[str, object]:
    tree = root([e.encode() for e in entries])
    when = "2026-12-06T00:00:00.000000Z"
    unsigned = SignedHead("onecluster export register", len(entries), tree, b"", when)
    signature = key.sign(unsigned.note().encode())
    public = key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    head = SignedHead(unsigned.origin, unsigned.size, tree, signature, unsigned.timestamp).to_dict()
    head["public_key"] = base64.b64encode(public).decode()
    return head


def test_the_browser_computes_the_registers_roots_and_checks_its_heads(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    sizes = [0, 1, 2, 3, 5, 8, 13, 100]
    good = _entries(7)
    head = _head(good, key)
    tampered = [*good[:3], good[3].replace("ds-3", "ds-X"), *good[4:]]
    forged = dict(head, signature=base64.b64encode(bytes(64)).decode())
    other_key = dict(head, public_key=_head(good, Ed25519PrivateKey.generate())["public_key"])
    cases = {
        "roots": [_entries(n) for n in sizes],
        "heads": [
            [head, good],
            [head, tampered],
            [forged, good],
            [other_key, good],
            [head, good[:5]],
        ],
    }
    result = _node(tmp_path, cases)
    assert result["roots"] == [root([e.encode() for e in _entries(n)]).hex() for n in sizes]
    problems = [c["problems"] for c in result["checks"]]  # type: ignore[index]
    assert problems == [
        [],
        ["root_mismatch"],
        ["bad_signature"],
        ["bad_signature"],
        ["entries_missing"],
    ]
