"""Alembic's environment for the store: the revisions run on the connection store.migrate passes in
(``config.attributes["connection"]``), inside the transaction and under the lock it holds, so the store's SQLite
functions (``assay_fold``, ``regexp``: store.engine registers them on every connection) exist for its triggers.
SQLite in batch mode (ALTER through a table rebuilt); the models' metadata is the target of autogenerate.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection
from sqlmodel import SQLModel

from store import models  # noqa: F401  (registers every table on SQLModel.metadata, autogenerate's target)


def run_migrations(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=SQLModel.metadata,
                      render_as_batch=connection.dialect.name == "sqlite", compare_type=True)
    with context.begin_transaction():
        context.run_migrations()


connection = context.config.attributes.get("connection")
if context.is_offline_mode() or not isinstance(connection, Connection):
    raise RuntimeError("the store's migrations run through store.migrate (assay db upgrade), on a connection it "
                       "holds the store's lock on: not from the alembic command, not offline")
run_migrations(connection)
