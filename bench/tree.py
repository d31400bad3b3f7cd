"""A deterministic tree of N small files in nested folders, generated once per N and reused.

Layout: ``WORK/tree-N/`` holds ``depth`` levels of folders, about ``FANOUT`` folders per level, and ~``PER_LEAF`` files
in each leaf folder (the upper folders hold only folders). File names, extensions, sizes (0 B to 8 KiB, real bytes)
and modification times (spread over three years) follow from the file's number alone, so two runs build the same tree.
Generation streams: nothing holds the list of paths. ``WORK/tree-N.json`` is written last; while it is there and
matches, the tree is reused. An interrupted generation is simply run again (files are rewritten in place).
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

log = logging.getLogger("bench.tree")

VERSION = 1
FANOUT = 20
PER_LEAF = 50
EPOCH = 1_700_000_000  # fixed "now" of the generated mtimes (2023-11-14), so trees are reproducible
SPREAD = 3 * 365 * 86400
EXTENSIONS = ("jpg", "png", "txt", "md", "pdf", "mp4", "json", "py", "csv", "log", "tar.gz", "", "html", "mov")
DIR_WORDS = ("photos", "docs", "src", "archive", "music", "misc", "projects", "data", "notes", "videos")
FILE_WORDS = ("report", "img", "track", "draft", "scan", "clip", "table", "main", "readme", "backup", "notes")
_PAYLOAD = b"assay-bench\n" * 700  # 8400 bytes to slice sizes from


@dataclass(frozen=True)
class TreeSpec:
    files: int
    depth: int
    fanout: int
    leaves: int
    version: int = VERSION

    @classmethod
    def for_files(cls, files: int) -> "TreeSpec":
        if files < 1:
            raise ValueError(f"a tree needs at least one file, got {files}")
        leaves = max(1, math.ceil(files / PER_LEAF))
        depth = max(1, math.ceil(math.log(leaves, FANOUT) - 1e-9))
        fanout = max(2, math.ceil(leaves ** (1 / depth) - 1e-9))
        return cls(files=files, depth=depth, fanout=fanout, leaves=leaves)

    @property
    def directories(self) -> int:
        """Folders below the root (every prefix of a leaf's path, counted once)."""
        total = 0
        for level in range(1, self.depth + 1):
            total += min(self.fanout ** level, math.ceil(self.leaves / self.fanout ** (self.depth - level)))
        return total


def dir_name(level: int, index: int) -> str:
    return f"{DIR_WORDS[(index + level) % len(DIR_WORDS)]}-{index:02d}"


def leaf_parts(spec: TreeSpec, leaf: int) -> list[str]:
    """The folder names from the root down to leaf number ``leaf`` (mixed-radix digits of ``leaf``)."""
    digits = []
    for _ in range(spec.depth):
        leaf, d = divmod(leaf, spec.fanout)
        digits.append(d)
    return [dir_name(level, d) for level, d in enumerate(reversed(digits))]


def files_in_leaf(spec: TreeSpec, leaf: int) -> range:
    """The file numbers in leaf ``leaf``: the files are dealt out evenly, earlier leaves taking the remainder."""
    base, extra = divmod(spec.files, spec.leaves)
    start = leaf * base + min(leaf, extra)
    return range(start, start + base + (1 if leaf < extra else 0))


def file_facts(n: int) -> tuple[str, int, float]:
    """Name, size and mtime of file number ``n``."""
    h = (n * 2654435761) & 0xFFFFFFFF
    ext = EXTENSIONS[h % len(EXTENSIONS)]
    name = f"{FILE_WORDS[(h >> 8) % len(FILE_WORDS)]}_{n:07d}" + (f".{ext}" if ext else "")
    size = 0 if h % 23 == 0 else (h >> 4) % 8192
    mtime = EPOCH - (h % SPREAD) - (n % 997) / 1000
    return name, size, mtime


def leaf_dirs(root: Path, spec: TreeSpec) -> Iterator[Path]:
    for leaf in range(spec.leaves):
        yield root.joinpath(*leaf_parts(spec, leaf))


def sample_dirs(root: Path, spec: TreeSpec, count: int) -> list[str]:
    """``count`` folders spread over every level: the root, upper folders and leaves (deterministic)."""
    picks: list[str] = [str(root)]
    step = max(1, spec.leaves // max(1, count))
    leaf = 0
    while len(picks) < count:
        parts = leaf_parts(spec, leaf % spec.leaves)
        level = 1 + len(picks) % spec.depth  # spec.depth: the leaf itself
        picks.append(str(root.joinpath(*parts[:level])))
        leaf += step + 7
    return picks


def _marker(work: Path, files: int) -> Path:
    return work / f"tree-{files}.json"


def ensure_tree(work: Path, files: int) -> tuple[Path, TreeSpec, bool]:
    """The tree of ``files`` files under ``work``; generated unless a matching one is there. Returns (root, spec,
    generated)."""
    spec = TreeSpec.for_files(files)
    root = work / f"tree-{files}"
    marker = _marker(work, files)
    if marker.exists():
        try:
            if json.loads(marker.read_text()).get("spec") == asdict(spec) and root.is_dir():
                log.info("reusing the tree of %s files at %s", f"{files:,}", root)
                return root, spec, False
        except (OSError, ValueError):
            pass
        marker.unlink()
    generate(root, spec)
    marker.write_text(json.dumps({"spec": asdict(spec), "root": str(root), "generated_at": time.time()}))
    return root, spec, True


def generate(root: Path, spec: TreeSpec) -> None:
    log.info("generating %s files in %s leaf folders (depth %d, fan-out %d) at %s",
             f"{spec.files:,}", f"{spec.leaves:,}", spec.depth, spec.fanout, root)
    started = time.monotonic()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    made = 0
    for leaf in range(spec.leaves):
        folder = root.joinpath(*leaf_parts(spec, leaf))
        folder.mkdir(parents=True, exist_ok=True)
        for n in files_in_leaf(spec, leaf):
            name, size, mtime = file_facts(n)
            fd = os.open(folder / name, flags, 0o644)
            try:
                if size:
                    os.write(fd, _PAYLOAD[:size])
                os.utime(fd, (mtime, mtime))
            finally:
                os.close(fd)
            made += 1
        if leaf % 2000 == 1999:
            log.info("  %s files (%.0f/s)", f"{made:,}", made / (time.monotonic() - started))
    log.info("generated %s files in %.1f s", f"{made:,}", time.monotonic() - started)
