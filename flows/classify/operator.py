"""The artifact cache (``<data dir>/cache``: thumbnails, timeline frames, excerpts) as the operator tools see it:
how much it holds, repairing it against the artifacts table, and clearing it.

Only well-formed cache paths (store.cache.is_cache_path) are ever removed: nothing else under the data dir, never a
user's file. A row whose file is gone is dropped so that the classifier makes it again (rerun-classifier, or the next
plan execution with a classifier outcome), as for an entry never classified; an orphan file goes through the sweep
(flows.classify.sweep), which keeps young files while classification is in flight anywhere on the store.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from flows.classify.sweep import classification_in_flight, find_orphans, iter_cache_files, sweep_cache
from flows.core.capability import data_dir
from flows.core.disk_usage import Usage, dir_usage
from store import artifacts as store_artifacts
from store import cache
from store.errors import Conflict
from store.operator_artifacts import delete_artifact_rows, delete_cached_artifacts

log = logging.getLogger(__name__)


def cache_usage(root: Path | None = None) -> Usage:
    """Files and bytes under the artifact cache of data dir ``root`` (default: this process's)."""
    return dir_usage(cache.cache_dir(root if root is not None else data_dir()))


def missing_artifact_ids(engine: Engine, root: Path) -> list[int]:
    """Ids of the artifact rows whose cache file is not under ``root`` (streamed over the table in id order)."""
    return [artifact_id for artifact_id, _, rel in store_artifacts.iter_artifact_cache_paths(engine)
            if not cache.file_of(root, rel).is_file()]


def repair_artifact_cache(engine: Engine, root: Path | None = None) -> dict[str, Any]:
    """Remove orphan cache files (the sweep, with its grace for files a worker may be about to commit) and drop the
    rows whose file is gone; what was done: ``orphans_removed``, ``orphan_bytes``, ``orphans_left`` (too young
    to remove while classification is in flight), ``rows_dropped``."""
    root = root if root is not None else data_dir()
    swept = sweep_cache(engine, root)
    dropped = delete_artifact_rows(engine, artifact_ids=missing_artifact_ids(engine, root))
    if dropped:
        log.info("artifact cache: dropped %d row(s) whose cache file was gone", dropped)
    left = sum(1 for _ in find_orphans(engine, root))
    return {"orphans_removed": swept.removed, "orphan_bytes": swept.removed_bytes, "orphans_left": left,
            "rows_dropped": dropped}


def clear_artifact_cache(engine: Engine, root: Path | None = None) -> dict[str, Any]:
    """Empty the artifact cache: every row backed by a cache file, then every cache file (made again on demand).
    Refused (Conflict) while classification is in flight, whose workers write files before their rows."""
    root = root if root is not None else data_dir()
    if classification_in_flight(engine):
        raise Conflict("classification is running (a classify job or a plan execution): its workers write cache "
                       "files before their rows, so the cache is not cleared now; try again once it has finished",
                       field="cache")
    rows = delete_cached_artifacts(engine)
    files = size = 0
    for _, entry in iter_cache_files(root):
        try:
            st = entry.stat(follow_symlinks=False)
            os.unlink(entry.path)
        except FileNotFoundError:
            continue
        except OSError as exc:
            log.warning("clearing the artifact cache could not remove %s: %s", entry.path, exc)
            continue
        files += 1
        size += st.st_size
    log.info("artifact cache cleared: %d row(s), %d file(s), %d bytes", rows, files, size)
    return {"rows": rows, "files": files, "bytes": size}
