"""Checks of the store's shape after a walk, shared by the indexing tests."""

from __future__ import annotations

import os
from collections import defaultdict
from contextlib import contextmanager

from store import entries
from store.diagnostics import diagnose


def stored_under(engine, root: str) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(
            entries.T.select().where(entries.subtree_clause(root))).mappings()]


def assert_store_consistent(engine, root: str) -> list[dict]:
    """Every stored entry under ``root`` has its parent stored, every directory's size is the sum of its stored
    children's, and db-diagnose is healthy. Returns the rows."""
    rows = stored_under(engine, root)
    paths = {r["path"] for r in rows}
    sums: dict[str, int] = defaultdict(int)
    for r in rows:
        if r["path"] != root:
            assert r["parent"] in paths, f"{r['path']} has no stored parent"
            sums[r["parent"]] += r["size"]
    for r in rows:
        if r["kind"] == "directory":
            assert r["size"] == sums[r["path"]], f"{r['path']}: size {r['size']} != its children's {sums[r['path']]}"
    report = diagnose(engine)
    assert report["healthy"], report["warnings"]
    assert report["orphaned_entries"] == 0
    return rows


# Root reads every folder (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH); a child started through setpriv without those
# capabilities is still uid 0 but meets permission bits like any user, so a chmod 000 folder really fails for it.
WITHOUT_READ_CAPS = ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--inh-caps=-all"]


def unreadable_for_children(tmp_path) -> bool:
    """Whether a child started with WITHOUT_READ_CAPS really cannot list a chmod 000 folder here."""
    import shutil
    import subprocess
    import sys

    if shutil.which("setpriv") is None:
        return False
    probe = tmp_path / "probe-000"
    probe.mkdir()
    probe.chmod(0)
    try:
        run = subprocess.run([*WITHOUT_READ_CAPS, sys.executable, "-c", f"import os; os.listdir({str(probe)!r})"],
                             capture_output=True, text=True)
    finally:
        probe.chmod(0o755)
        probe.rmdir()
    return run.returncode != 0 and "PermissionError" in run.stderr


@contextmanager
def vanishing_mid_walk(victims: set[str]):
    """While inside, the indexer's listings delete ``victims`` (paths) between listing them and their stat, as a
    concurrent process would."""
    import flows.index.indexer as indexer_mod

    real_scandir = indexer_mod.os.scandir

    class Vanishing:
        def __init__(self, it):
            self.it = it

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.it.close()

        def __iter__(self):
            for item in self.it:
                if item.path in victims:
                    os.unlink(item.path)
                yield item

    indexer_mod.os.scandir = lambda p: Vanishing(real_scandir(p))
    try:
        yield
    finally:
        indexer_mod.os.scandir = real_scandir
