"""`assay undo`, run as a separate process: a plan execution's moves listed in a path's history, undone in a dry run
(nothing changes), then for real (the files are back); again: every operation refused, exit 1; bad input exits 2."""

from __future__ import annotations

import json
from pathlib import Path

from dsl.model import Plan
from flows.core.roots import Roots
from flows.plans.service import PlanService
from store.engine import make_engine
from tests.conftest import make_tree
from tests.mcp_server.test_cli import assay


def test_undo_a_plan_execution_from_the_command_line(tmp_path: Path):
    tree = make_tree(tmp_path / "home" / "user")
    (tmp_path / "data").mkdir()
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'assay.db'}")
    service = PlanService(engine, Roots.of([str(tree)]), use_prefect=False)
    try:
        p = Plan.from_object({"name": "sort", "sources": [{"name": "home", "type": "filesystem.index",
                                                           "config": {"path": str(tree)}}],
                              "rules": [{"name": "t", "when": "extension = .txt",
                                         "outcomes": [{"type": "move", "to": "Sorted/"}]}]})
        service.save(p, create=None)
        execution = service.execute(p, wait=True)["execution_id"]
    finally:
        service.shutdown()
        engine.dispose()
    root = ("--root", str(tree))
    history = assay(tmp_path, "undo", "--history", str(tree / "Sorted"), *root)
    assert history.returncode == 0, history.stderr
    assert "notes.txt" in history.stdout and f"execution {execution}" in history.stdout
    dry = assay(tmp_path, "undo", "--execution", str(execution), "--dry-run", "--json", *root)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["wouldUndo"] == 2 and (tree / "Sorted" / "notes.txt").exists()
    done = assay(tmp_path, "undo", "--execution", str(execution), *root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("2 operation(s) undone, 0 refused")
    assert (tree / "Photos" / "notes.txt").exists() and not (tree / "Sorted" / "notes.txt").exists()
    again = assay(tmp_path, "undo", "--execution", str(execution), *root)
    assert again.returncode == 1 and "undone already" in again.stdout
    bad = assay(tmp_path, "undo", "--execution", "999", *root)
    assert bad.returncode == 2 and "no file operation" in bad.stderr
