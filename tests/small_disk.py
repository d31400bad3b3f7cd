"""A small filesystem a test fills up: a tmpfs of a few hundred KiB mounted at a folder (we run as root), with a filler
file that leaves as many bytes free as the test wants and is deleted to free them again ("after space is freed").

The out-of-disk tests (tests/store/test_no_space.py, tests/flows/media/test_no_space.py,
tests/flows/classify/test_no_space.py, tests/e2e/test_out_of_disk.py) put a data dir, a cache or a temporary folder on
one. A test where mounting is refused (not root, no tmpfs) is skipped, saying why. The disk is unmounted when the
context ends (lazily when a process still holds a file there), so nothing of it outlives the test.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest

BLOCK = 4096  # tmpfs counts whole pages


class SmallDisk:
    """A mounted tmpfs at ``path``; ``fill`` / ``unfill`` move its free space with a filler file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.filler = path / ".filler"

    def free_bytes(self) -> int:
        st = os.statvfs(self.path)
        return st.f_bavail * st.f_frsize

    def fill(self, leave: int) -> int:
        """Grow the filler until about ``leave`` bytes are free (never more than there are); returns what is free."""
        extra = self.free_bytes() - leave
        if extra > 0:
            with open(self.filler, "ab") as fh:
                fh.write(b"\0" * (extra // BLOCK * BLOCK))
        return self.free_bytes()

    def unfill(self) -> int:
        """Delete the filler (the space the test took is free again); returns what is free."""
        self.filler.unlink(missing_ok=True)
        return self.free_bytes()


@contextmanager
def small_disk(path: Path, kib: int) -> Iterator[SmallDisk]:
    """A tmpfs of ``kib`` KiB mounted at ``path`` (made if missing) for the block; skips the test when mounting is
    refused."""
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={kib}k,mode=0755", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"a small tmpfs for the out-of-disk test cannot be mounted here (needs root): "
                    f"{mounted.stderr.strip() or mounted.returncode}")
    try:
        yield SmallDisk(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)  # a process still holds a file
