"""Undo tells an unchanged file by its size and mtime, as the journal wrote them down (git's index trick), and reads
it for its content hash only otherwise: a file untouched since goes back unread; one rewritten since (a newer mtime)
is read and refused; one rewritten right after it was written down, its size and mtime put back, is read (its mtime
is too close to the journal's row to be trusted) and refused."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from dsl.model import Plan
from flows.core.roots import Roots
from flows.fileops import undo as undo_module
from flows.plans.service import PlanService
from store import file_journal

OLD = time.mktime((2020, 3, 1, 12, 0, 0, 0, 0, -1))


@pytest.fixture
def service(engine, tree, monkeypatch, tmp_path):
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "home-dir"))
    svc = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    yield svc
    svc.shutdown()


def moved(service: PlanService, tree: Path, mtime: float) -> tuple[Path, int]:
    """notes.txt (mtime ``mtime``) moved into Sorted/ by a plan; where it is now and the execution's id."""
    src = next(tree.rglob("notes.txt"))
    os.utime(src, (mtime, mtime))
    p = Plan.from_object({"name": "sort", "sources": [{"name": "home", "type": "filesystem.index",
                                                       "config": {"path": str(tree)}}],
                          "rules": [{"name": "r", "when": "name = notes.txt",
                                     "outcomes": [{"type": "move", "to": "Sorted/"}]}]})
    service.save(p, create=None)
    row = service.execute(p, wait=True)
    assert row["outcomes_applied"] == 1, row
    return tree / "Sorted" / "notes.txt", row["execution_id"]


def undo(service: PlanService, execution_id: int) -> dict:
    return undo_module.undo(service.engine, service.roots, origin=file_journal.Origin.for_tool("undo"),
                            execution_id=execution_id)


def reads(monkeypatch) -> list[str]:
    """The paths undo reads for their content hash."""
    read: list[str] = []
    real = undo_module.hash_file
    monkeypatch.setattr(undo_module, "hash_file", lambda path: read.append(path) or real(path))
    return read


def test_a_file_untouched_since_goes_back_without_being_read(service, tree, monkeypatch):
    here, execution_id = moved(service, tree, OLD)
    read = reads(monkeypatch)
    result = undo(service, execution_id)
    assert (result["undone"], result["refused"], read) == (1, 0, [])
    assert not here.exists()


def test_a_file_rewritten_since_is_read_and_refused(service, tree, monkeypatch):
    here, execution_id = moved(service, tree, OLD)
    here.write_bytes(b"edited after the move")
    read = reads(monkeypatch)
    result = undo(service, execution_id)
    assert (result["undone"], result["refused"], read) == (0, 1, [str(here)])
    assert "changed since" in result["results"][0]["reason"]


def test_a_same_size_rewrite_right_after_with_its_mtime_put_back_is_read_and_refused(service, tree, monkeypatch):
    here, execution_id = moved(service, tree, time.time())
    st = here.stat()
    here.write_bytes(b"y" * st.st_size)  # same size, other bytes
    os.utime(here, ns=(st.st_atime_ns, st.st_mtime_ns))
    read = reads(monkeypatch)
    result = undo(service, execution_id)
    assert (result["undone"], result["refused"], read) == (0, 1, [str(here)])
    assert "changed since" in result["results"][0]["reason"]
