"""Where a store's hnswlib files live: beside the database.

SQLite: ``<database file>.vectors/`` next to it. Any other store (PostgreSQL): ``<data dir>/vectors/<12 hex digits
of the store URL's hash>/``, so two stores sharing a data dir never share files. One file per collection,
``<collection id>.hnsw`` with ``<collection id>.json`` (the collection version it holds).
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy.engine import Engine

from flows.core import settings
from flows.core.capability import data_dir, store_files


def vector_dir(engine: Engine) -> Path:
    """The directory of ``engine``'s hnswlib files (created)."""
    return store_files(engine, "vectors")


def model_cache_dir() -> Path:
    """Where exported model backends (ONNX, OpenVINO) are cached: the setting ``semantic.model_cache``
    (ASSAY_MODEL_CACHE; the test suite shares one across its servers' data dirs, so each export is built once per
    run), else ``<data dir>/models``."""
    path = settings.current().semantic.model_cache or data_dir() / "models"
    path.mkdir(parents=True, exist_ok=True)
    return path
