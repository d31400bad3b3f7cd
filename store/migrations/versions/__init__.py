"""The store's revisions, one module each, oldest first by their numbers (Alembic reads them; nothing imports them)."""
