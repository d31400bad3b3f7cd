"""Walkers compared on the benchmark tree: why the indexer walks with a sequential os.scandir.

    .venv/bin/python bench/walkers.py [--files 100000] [--work /tmp/assay-bench] [--repeat 5]

Each walker lists every folder and stats every entry (what the indexer needs: size, times, inode), keeping nothing;
best of ``--repeat`` runs, warm cache, next to GNU find doing the same. ``scandir-rs`` (a compiled, multi-threaded
walker on PyPI) is measured when it is installed (``pip install scandir-rs``); it is not a dependency.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench.tree import ensure_tree  # noqa: E402


def walk_sequential(root: str) -> int:
    """The indexer's walk: a stack of folders, os.scandir, one stat per entry."""
    n, stack = 0, [root]
    while stack:
        with os.scandir(stack.pop()) as it:
            for item in it:
                item.stat(follow_symlinks=False)
                n += 1
                if item.is_dir(follow_symlinks=False):
                    stack.append(item.path)
    return n


def _list(directory: str) -> tuple[int, list[str]]:
    n, subdirs = 0, []
    with os.scandir(directory) as it:
        for item in it:
            item.stat(follow_symlinks=False)
            n += 1
            if item.is_dir(follow_symlinks=False):
                subdirs.append(item.path)
    return n, subdirs


def walk_threads(root: str, workers: int) -> int:
    """Each folder listed and stat'ed by a pool of threads (the syscalls release the GIL)."""
    n = 0
    with ThreadPoolExecutor(workers) as pool:
        pending = [pool.submit(_list, root)]
        while pending:
            count, subdirs = pending.pop().result()
            n += count
            pending.extend(pool.submit(_list, d) for d in subdirs)
    return n


def walk_scandir_rs(root: str) -> int:
    import scandir_rs

    return sum(1 for _ in scandir_rs.Scandir(root, return_type=scandir_rs.ReturnType.Ext))


def walk_find(root: str) -> int:
    subprocess.run(["find", root, "-printf", "%s %T@ %p\n"], stdout=subprocess.DEVNULL, check=True)
    return -1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench/walkers.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--files", type=int, default=100_000)
    p.add_argument("--work", default=os.path.join(tempfile.gettempdir(), "assay-bench"))
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    root, _spec, _ = ensure_tree(Path(args.work), args.files)
    walkers = [("GNU find -printf (the limit)", walk_find), ("os.scandir, sequential (the indexer's)", walk_sequential)]
    walkers += [(f"os.scandir, {w} threads", lambda r, w=w: walk_threads(r, w)) for w in (2, 4, 8)]
    try:
        import scandir_rs  # noqa: F401

        walkers.append(("scandir-rs (Scandir, Ext stats)", walk_scandir_rs))
    except ImportError:
        pass
    walk_sequential(str(root))  # warm the cache
    print(f"{args.files:,} files, warm cache, best of {args.repeat}; load average {os.getloadavg()[0]:.2f}\n")
    print("| walker | seconds | × find |\n| --- | --- | --- |")
    find_s = None
    for name, fn in walkers:
        best = min(_timed(fn, str(root)) for _ in range(args.repeat))
        find_s = find_s or best
        print(f"| {name} | {best:.3f} | {best / find_s:.2f}× |")
    return 0


def _timed(fn, root: str) -> float:
    started = time.perf_counter()
    fn(root)
    return time.perf_counter() - started


if __name__ == "__main__":
    sys.exit(main())
