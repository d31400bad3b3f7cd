"""Plain files and the write helpers every maker uses: ``prepare`` (the parent folders), ``atomic`` (written beside the
final name, then renamed); text files and noise."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from pathlib import Path


def prepare(path: str | Path) -> Path:
    """``path`` as a Path, its parent folders created."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def atomic(path: str | Path, write: Callable[[Path], object]) -> Path:
    """``write(tmp)`` into a temp name beside ``path`` (same extension, so tools that go by it still can), then
    rename it to ``path``: a file that exists is complete. The temp file is removed if ``write`` fails."""
    path = prepare(path)
    tmp = path.with_name(f".tmp-{os.getpid()}-{path.name}")
    try:
        write(tmp)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def text(path: str | Path, lines: int = 10, *, encoding: str = "utf-8") -> Path:
    """``lines`` lines of "line N: the quick brown fox — café"."""
    path = prepare(path)
    path.write_text("".join(f"line {i}: the quick brown fox — café\n" for i in range(lines)), encoding=encoding)
    return path


def noise(path: str | Path, size: int, seed: object) -> Path:
    """``size`` bytes of deterministic noise from ``seed`` (incompressible, like a disk image or an archive)."""
    path = prepare(path)
    path.write_bytes(random.Random(seed).randbytes(size))
    return path
