"""Which folders are trashes, so that what is in a trash is never indexed or watched: the freedesktop.org volume
trashes (``.Trash-$uid``, and ``.Trash`` holding one per user), the home trash (``~/.local/share/Trash``) and
assay's own (``<data dir>/trash``), both recognised by their ``files/`` and ``info/``. The indexer skips them as it
walks; a watcher drops events inside them (a file trashed from a watched volume lands in its ``.Trash-$uid``).
A folder a trash holds is skipped whole, so a path is in a trash when one of the folders above it is one."""

from __future__ import annotations

import os


def is_volume_trash(name: str) -> bool:
    """A volume trash by its name alone: ``.Trash`` or ``.Trash-<uid>``."""
    return name == ".Trash" or (name.startswith(".Trash-") and name[7:].isdigit())


def is_trash_dir(path: str, name: str) -> bool:
    """Whether the folder ``path`` (whose last component is ``name``) is a trash: a volume trash by name, or a
    ``Trash``/``trash`` holding both ``files`` and ``info`` (two stats, only for folders so named)."""
    if is_volume_trash(name):
        return True
    if name in ("Trash", "trash"):
        return os.path.isdir(os.path.join(path, "files")) and os.path.isdir(os.path.join(path, "info"))
    return False


def under_trash(root: str, relative: list[str]) -> bool:
    """Whether the path ``root``/``relative...`` is a trash folder below ``root`` or lies in one (the test the
    indexer's walk makes, for each folder on the way down: a watcher's view of what the walk skips)."""
    folder = root.rstrip("/")
    for name in relative:
        folder = f"{folder}/{name}"
        if is_trash_dir(folder, name):
            return True
    return False
