"""A file or folder moved to the trash of its volume, journalled, with the store in step: the one way delete-files
(unless ``permanent``), the ``trash`` outcome and an ``overwrite`` put something away, so undo can bring it back.

The journal row (op ``trash``) is written with the file's size, mtime and content hash before the disk changes, and
what its entries hold that nothing can make again (set memberships, maps an agent supplied: store/kept.py) is kept
with it, also before the disk changes, so an entry the crash recovery deletes loses nothing; the trash module
(:mod:`flows.fileops.trash`) moves it (one rename on its own volume, else a checked copy into assay's own trash);
then, in one transaction, its entries leave the store and the row is crossed out with where it went. A file
restored by undo is indexed again where its folder is, and gets back what was kept.
"""

from __future__ import annotations

import os

from sqlalchemy.engine import Engine

from flows.core.settings import current
from flows.fileops import trash
from flows.fileops.journal import before
from store import file_journal, kept
from store.entries import delete_subtree, refresh_ancestor_sizes
from store.errors import AssayError


def home() -> str:
    """The home whose trash files on its volume go to: ``ASSAY_TRASH_HOME``, else the server's user's."""
    return os.environ.get("ASSAY_TRASH_HOME") or os.path.expanduser("~")


def trash_one(engine: Engine, origin: file_journal.Origin, path: str) -> tuple[trash.Trashed, int]:
    """Put ``path`` in the trash, journalled; returns where it went and how many index entries left with it."""
    op_id = file_journal.begin(engine, origin, op="trash", src=path, dst=None, **before(engine, path).columns())
    try:
        with engine.begin() as conn:
            kept.keep(conn, operation_id=op_id, path=path)
        gone = trash.move_to_trash(path, home=home(), data_dir=str(current().data_dir))
    except (OSError, AssayError) as exc:
        file_journal.failed(engine, op_id, str(exc))
        raise
    with engine.begin() as conn:
        removed = delete_subtree(conn, path=path)
        refresh_ancestor_sizes(conn, path=path)
        file_journal.done(conn, op_id, dst=gone.path)
    return gone, removed
