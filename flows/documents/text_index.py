"""The text engine (store.textindex) of a store, one per store in a process: where its files live and when it
catches up.

Files: SQLite: ``<database file>.textindex/`` beside it; any other store (PostgreSQL): ``<data dir>/textindex/<12 hex
digits of the store URL's hash>/``. A serving process keeps the index caught up from a background thread
(``start_text_index``, the documents capability's ``start_background``); any search catches up first with a small
budget, so text written a moment ago by another process is found.
"""

from __future__ import annotations

import threading
from pathlib import Path

from sqlalchemy.engine import Engine

from flows.core.capability import store_files
from flows.documents import search_pool
from store.textindex import TextIndex

_lock = threading.Lock()
_indexes: dict[str, TextIndex] = {}


def text_index_dir(engine: Engine) -> Path:
    """The directory of ``engine``'s text index (created)."""
    return store_files(engine, "textindex")


def text_index(engine: Engine) -> TextIndex:
    """The process's TextIndex of ``engine``'s store."""
    key = engine.url.render_as_string(hide_password=False)
    with _lock:
        index = _indexes.get(key)
        if index is None:  # one per store: another engine of the same store shares it
            index = _indexes[key] = TextIndex(text_index_dir(engine), engine)
        return index


def start_text_index(engine: Engine) -> None:
    """Keep the store's text index caught up in the background, and start the search workers of search_multiple
    (a serving process)."""
    index = text_index(engine)
    index.start()
    threading.Thread(target=lambda: search_pool.warm(index.dir, index.snapshot(0)), name="search-pool",
                     daemon=True).start()


def close_text_indexes() -> None:
    """Stop the background threads and let go of the files (tests; a process that ends needs nothing)."""
    with _lock:
        for index in _indexes.values():
            index.close()
        _indexes.clear()
