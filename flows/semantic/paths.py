"""Where a store's hnswlib files live: beside the database.

SQLite: ``<database file>.vectors/`` next to it. Any other store (PostgreSQL): ``<data dir>/vectors/<12 hex digits
of the store URL's hash>/``, so two stores sharing a data dir never share files. One file per collection,
``<collection id>.hnsw`` with ``<collection id>.json`` (the collection version it holds).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from sqlalchemy.engine import Engine

from flows.core import settings
from flows.core.capability import data_dir
from store.engine import database_file


def vector_dir(engine: Engine) -> Path:
    """The directory of ``engine``'s hnswlib files (created)."""
    db = database_file(engine)
    if db is not None:
        path = db.with_name(db.name + ".vectors")
    else:
        url = engine.url.render_as_string(hide_password=True)
        path = data_dir() / "vectors" / hashlib.sha256(url.encode()).hexdigest()[:12]
    path.mkdir(parents=True, exist_ok=True)
    return path


def model_cache_dir() -> Path:
    """Where exported model backends (ONNX, OpenVINO) are cached: the setting ``semantic.model_cache``
    (ASSAY_MODEL_CACHE; the test suite shares one across its servers' data dirs, so each export is built once per
    run), else ``<data dir>/models``."""
    path = settings.current().semantic.model_cache or data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path
