"""The store's Alembic migrations: ``env.py`` (run on the connection store.migrate passes in), ``script.py.mako``
(a new revision's template) and ``versions/`` (the revisions). Configured in code (store.migrate.alembic_config):
no alembic.ini.

A change to the models (store/models) is a new revision in ``versions/``, numbered after the last
(``0002_<what>.py``, ``revision = "0002_<what>"``); tests/store/test_migrations.py fails until the migrated schema
equals the models'. Alembic can write its first draft from a store at the current head::

    from alembic import command
    from store.migrate import alembic_config
    with engine.begin() as conn:
        command.revision(alembic_config(conn), "what changed", rev_id="0002_what", autogenerate=True)
"""

from __future__ import annotations

from pathlib import Path

SCRIPT_LOCATION = Path(__file__).parent
