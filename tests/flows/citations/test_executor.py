"""The map outcome through real plan runs: citable files mapped (others not applicable, a corrupt one an outcome
error), unchanged files skipped on a re-run (a failed one too, until it changes), a changed strategy rebuilding, agent
maps never overwritten."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsl.model import Plan
from examples.mediagen import png
from examples.mediagen.citations import markdown_headings
from examples.mediagen.documents import pdf_with_outline, truncated_pdf
from flows.citations import builders
from flows.citations.executor import MapExecutor
from flows.citations.service import CitationService
from flows.core.outcomes import installed_executors
from flows.plans.service import PlanService
from flows.core.roots import Roots
from store.engine import make_engine


@pytest.fixture
def setup(tmp_path: Path):
    root = tmp_path / "lib"
    pdf_with_outline(root / "book.pdf", pages=5)
    markdown_headings(root / "notes.md")
    png(root / "diagram.png", size=(40, 30))
    truncated_pdf(root / "broken.pdf")
    (root / "data.bin").write_bytes(b"\x00\x01")
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    plans = PlanService(engine, Roots.of([str(root)]), use_prefect=False)
    yield engine, plans, CitationService(engine, Roots.of([str(root)]), tmp_path / "data"), root
    plans.shutdown()
    engine.dispose()


def _run(plans: PlanService, root: Path, outcome: dict, when: str = "size > 0") -> tuple[dict, dict]:
    plan = Plan.from_object({"name": "maps", "sources": [{"name": "lib", "type": "filesystem.index",
                                                          "config": {"path": str(root)}}],
                             "rules": [{"name": "map", "when": when, "outcomes": [outcome]}]})
    plans.save(plan, create=None)
    row = plans.execute(plan, wait=True)
    return row, row["summary"]["rules"]["map"]["outcomes"][0]


def test_citable_files_are_mapped_and_a_rerun_skips_them(setup, monkeypatch):
    engine, plans, svc, root = setup
    row, summary = _run(plans, root, {"type": "map"})
    # book.pdf (outline), notes.md (headings), diagram.png (whole); broken.pdf fails; data.bin is not citable
    assert (summary["applied"], summary["errors"], summary["unchanged"]) == (3, 1, 1)
    assert row["status"] == "partial" and any("EXTRACTION_FAILED" in s for s in summary["error_samples"])
    assert svc.list_resources()["resources"] == ["book", "broken", "diagram", "notes"]
    origins = {rid: svc.get_structure(rid).metadata["origin"] for rid in ("book", "notes", "diagram")}
    assert origins == {"book": "outline", "notes": "headings", "diagram": "whole"}

    built: list[str] = []
    real = builders.build
    monkeypatch.setattr(builders, "build", lambda path, *a, **kw: built.append(Path(path).name) or real(path, *a,
                                                                                                          **kw))
    _, again = _run(plans, root, {"type": "map"})
    # the same bytes fail the same way: the broken file is not tried again while it is unchanged
    assert again["skipped_unchanged_entries"] == 4 and built == []
    (root / "broken.pdf").write_bytes((root / "broken.pdf").read_bytes() + b"x")  # changed: tried again
    _, changed = _run(plans, root, {"type": "map"})
    assert built == ["broken.pdf"] and changed["errors"] == 1

    built.clear()
    _, windows = _run(plans, root, {"type": "map", "strategy": "windows", "window": 2}, when="extension = .pdf")
    assert windows["applied"] == 1 and built == ["book.pdf", "broken.pdf"]
    book = svc.get_structure("book")
    assert [n.location.pages for n in book.nodes] == [[1, 2], [3, 4], [5, 5]]
    assert (book.metadata["origin"], book.metadata["strategy"]) == ("windows", "windows")


def test_a_plan_never_overwrites_an_agent_map_and_unfit_strategies_are_not_errors(setup):
    engine, plans, svc, root = setup
    svc.put_map("notes.md", [{"id": "all", "location": {"modality": "text", "lines": [1, 20]}}])
    _, summary = _run(plans, root, {"type": "map", "strategy": "outline"}, when="extension in (.md, .png)")
    assert (summary["applied"], summary["unchanged"], summary["errors"]) == (0, 2, 0)
    assert [n.id for n in svc.get_structure("notes").nodes] == ["all"]


def test_the_executor_is_registered():
    assert isinstance(installed_executors()["map"], MapExecutor)
