"""assay's own folders, so that what assay writes is never indexed or watched: the data dir (the store, the artifact
cache, the text index, Prefect's home) and the artifact cache when it lies elsewhere (``cluster.cache_dir``, read by
``store.cache`` from ``ASSAY_CACHE_DIR``). A root that holds one of them (a watched home holding ``~/.assay``) would
otherwise index the store's files and watch its every write. The indexer's walk skips such a folder by identity
(device and inode, so any spelling of its path matches); a watcher drops the events under it (``below``: its paths
spelled from the watched root). Like a trash (flows/core/trash_dirs), an own folder is skipped whole, and only below
a root: a root that is one, or lies inside one, is walked as asked."""

from __future__ import annotations

import os

from flows.core.capability import data_dir
from store import cache


def own_dirs() -> list[str]:
    """The real paths of assay's own folders: the data dir, and the cache folder when it is not inside it."""
    root = data_dir()
    found: list[str] = []
    for folder in (root, cache.cache_dir(root)):
        real = os.path.realpath(os.path.expanduser(folder))
        if not any(real == d or real.startswith(d + "/") for d in found):
            found.append(real)
    return found


def own_dir_ids() -> frozenset[tuple[int, int]]:
    """(device, inode) of each own folder that exists: the walk's test of a folder it meets (a stat it has)."""
    ids = set()
    for folder in own_dirs():
        try:
            st = os.stat(folder)
        except OSError:
            continue
        ids.add((st.st_dev, st.st_ino))
    return frozenset(ids)


def below(root: str) -> tuple[str, ...]:
    """The own folders strictly below ``root``, each spelled from ``root`` (a root reached through a symlink too)
    and ending in ``/``: the prefixes :func:`in_own_dir` tests."""
    spelled = root.rstrip("/") or "/"
    real = os.path.realpath(spelled).rstrip("/")
    return tuple(f"{spelled.rstrip('/')}{d[len(real):]}/" for d in own_dirs() if d.startswith(real + "/"))


def in_own_dir(path: str, prefixes: tuple[str, ...]) -> bool:
    """Whether ``path`` is one of the own folders :func:`below` gave, or lies in one."""
    return bool(prefixes) and (path + "/").startswith(prefixes)
