"""Folders the indexer cannot read, for real: the walk runs in a child process without root's read capabilities,
so a chmod 000 folder fails with EACCES exactly as it would for any user."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from flows.index.navigation import inspect_entry, navigate_dir
from flows.index.indexer import index_tree
from flows.core.roots import Roots
from store import jobs
from tests.flows.index.checks import WITHOUT_READ_CAPS, assert_store_consistent, unreadable_for_children

REPO = Path(__file__).resolve().parents[3]

INDEX = """
import sys
from flows.index.flow import run_index_job
from store import jobs
from store.engine import make_engine
engine = make_engine(sys.argv[1])
job_id = jobs.create_job(engine, root=sys.argv[2])
print(run_index_job(engine, job_id=job_id, root=sys.argv[2])["id"])
"""


@pytest.fixture(autouse=True)
def _needs_setpriv(tmp_path):
    if not unreadable_for_children(tmp_path):
        pytest.skip("setpriv cannot drop the read capabilities here")


def index_without_read_caps(engine, root: Path) -> int:
    run = subprocess.run([*WITHOUT_READ_CAPS, sys.executable, "-c", INDEX, str(engine.url), str(root)],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert run.returncode == 0, run.stderr
    return int(run.stdout.split()[-1])


def locked_tree(root: Path) -> Path:
    (root / "open").mkdir(parents=True)
    (root / "open" / "a.txt").write_text("aaa")
    (root / "locked" / "inner").mkdir(parents=True)
    (root / "locked" / "secret.txt").write_text("s" * 40)
    (root / "locked" / "inner" / "deep.txt").write_text("d" * 7)
    return root


def test_an_unreadable_folder_is_shown_as_unreadable_with_its_known_contents(engine, tmp_path):
    root = locked_tree(tmp_path / "t")
    index_tree(engine, str(root), scan_id=0)  # as root: everything is read
    (root / "locked").chmod(0)
    try:
        job_id = index_without_read_caps(engine, root)
    finally:
        (root / "locked").chmod(0o755)
    roots = Roots.of([str(root)])
    page = navigate_dir(engine, roots, path=str(root / "locked"))
    assert page["complete"] is False and page["scanError"] == "unreadable: Permission denied"
    assert "could not be read (Permission denied)" in page["message"]
    assert sorted(e["name"] for e in page["entries"]) == ["inner", "secret.txt"]  # known from the earlier scan
    listed = {e["name"]: e for e in navigate_dir(engine, roots, path=str(root))["entries"]}
    assert listed["locked"]["scanError"] == "unreadable: Permission denied" and listed["locked"]["size"] == 47
    assert "scanError" not in listed["open"]
    info = inspect_entry(engine, roots, path=str(root / "locked"))
    assert info["complete"] is False and info["scanError"] == "unreadable: Permission denied"
    assert (str(root / "locked"), "unreadable: Permission denied") in [
        (i["path"], i["reason"]) for i in jobs.job_issues(engine, job_id=job_id)]
    assert jobs.get_job(engine, job_id=job_id)["status"] == "completed"
    assert_store_consistent(engine, str(root))

    index_tree(engine, str(root), scan_id=job_id + 1)  # readable again: complete again
    assert navigate_dir(engine, roots, path=str(root / "locked"))["complete"] is True


def test_a_folder_unreadable_at_its_first_scan_is_not_shown_as_an_empty_folder(engine, tmp_path):
    root = locked_tree(tmp_path / "t")
    (root / "locked").chmod(0)
    try:
        index_without_read_caps(engine, root)
    finally:
        (root / "locked").chmod(0o755)
    page = navigate_dir(engine, Roots.of([str(root)]), path=str(root / "locked"))
    assert page["total"] == 0 and page["complete"] is False
    assert page["scanError"] == "unreadable: Permission denied"
    assert jobs.fresh_scan_of(engine, path=str(root / "locked"), max_age=3600) is None  # index will not skip it
