"""How much a directory holds on disk, for the operator tools (get_memory_stats, clear_cache): its files and their
bytes, read with ``os.scandir`` (streamed, never following links), a directory that is missing counting as empty."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Usage:
    files: int = 0
    bytes: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.files + other.files, self.bytes + other.bytes)

    def as_dict(self) -> dict[str, int]:
        return {"files": self.files, "bytes": self.bytes}


def file_usage(path: str | Path) -> Usage:
    """One file's usage; nothing when it is missing (or not a regular file)."""
    try:
        st = os.lstat(path)
    except OSError:
        return Usage()
    return Usage(1, st.st_size) if stat.S_ISREG(st.st_mode) else Usage()


def dir_usage(path: str | Path) -> Usage:
    """The regular files under ``path`` (recursively) and their bytes; symbolic links are neither followed nor
    counted, and a folder that cannot be read counts as empty."""
    files = size = 0
    stack = [str(path)]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            files += 1
                            size += entry.stat(follow_symlinks=False).st_size
                    except OSError:  # removed while we looked
                        continue
        except OSError:
            continue
    return Usage(files, size)
