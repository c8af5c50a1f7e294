"""The files of a state directory (``--state-dir``, default ``./.state``), named once.

The server writes them and every other part reads them: ``up``, the lab and the CLI, which
finds the server and the admin token there (``docs/cli.md``).
"""

from __future__ import annotations

__all__ = ["ADMIN_TOKEN_FILE", "DATABASE_FILE", "REGISTER_DIR", "SERVER_URL_FILE"]

#: The bootstrap admin token, written (0600) at the server's first start.
ADMIN_TOKEN_FILE = "admin.token"  # noqa: S105 (a file name, not a secret)
#: The URL the server listens on, written once it listens and removed when it stops.
SERVER_URL_FILE = "server.url"
#: The server's SQLite database when no ``--db`` is given.
DATABASE_FILE = "onecluster.db"
#: The export register: its entries, signed checkpoints and keys (``docs/export.md``).
REGISTER_DIR = "register"
