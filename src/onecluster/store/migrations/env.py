"""Alembic environment: runs migrations on the connection the caller hands over.

:func:`onecluster.store.migrate` puts an open connection in ``config.attributes["connection"]``;
no ``alembic.ini`` and no URL are read here, so nothing depends on the working directory.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from onecluster.store._tables import Base


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


_connection = context.config.attributes.get("connection")
if not isinstance(_connection, Connection):
    msg = "onecluster migrations run only through onecluster.store.migrate(engine)"
    raise RuntimeError(msg)
_run(_connection)
