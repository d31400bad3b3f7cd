"""The extract_text outcome: only documents are extracted, unchanged ones never again, bad ones recorded and reported
as outcome errors without stopping the batch, results written in chunks as they arrive, cancellation honoured.

Most tests swap the extraction pool for a small in-process fake (what goes in and what comes out is what these tests
are about); one runs the real pool on generated documents."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsl.model import Plan
from flows.documents import executor as ex
from flows.documents.model import FILTER_FAILED
from flows.core.outcomes import EXECUTORS, RunContext
from flows.plans.service import PlanService
from flows.core.roots import Roots
from store import documents as store_docs
from store.entries import T as E
from tests.flows.documents.conftest import FakeExtraction


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def engine(request, data_dir):
    """Every test here runs on both stores (PostgreSQL fills ``folded`` itself; SQLite's triggers do)."""
    from store.engine import make_engine
    from tests.conftest import fresh_pg_database

    if request.param == "sqlite":
        eng = make_engine(f"sqlite:///{data_dir / 'assay.db'}")
        yield eng
        eng.dispose()
        return
    with fresh_pg_database(request.getfixturevalue("pg_url"), "assay_docx") as url:
        eng = make_engine(url)
        yield eng
        eng.dispose()


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    (root / "notes").mkdir(parents=True)
    (root / "notes" / "alpha.md").write_text("# Alpha\nthe alpha line\n")
    (root / "notes" / "beta.txt").write_text("beta text\nsecond line\n")
    (root / "code.py").write_text("print('gamma')\n")
    (root / "locked.pdf").write_bytes(b"%PDF-1.7 pretend encrypted")
    (root / "photo.jpg").write_bytes(b"\xff\xd8\xff not really a jpeg")
    (root / "scan.png").write_bytes(b"\x89PNG not really a png")
    (root / "data.bin").write_bytes(b"\x00\x01")
    return root


def _plan(root: Path, *, when: str = "extension != .bin", ocr: bool | None = None) -> Plan:
    outcome = {"type": "extract_text"} if ocr is None else {"type": "extract_text", "ocr": ocr}
    return Plan.from_object({"name": "docs", "sources": [{"name": "lib", "type": "filesystem.index",
                                                          "config": {"path": str(root)}}],
                             "rules": [{"name": "extract", "when": when, "outcomes": [outcome]}]})


def _service(engine, root: Path) -> PlanService:
    return PlanService(engine, Roots.of([str(root)]), use_prefect=False)


def _run(svc: PlanService, plan: Plan) -> dict:
    svc.save(plan, create=None)
    return svc.execute(plan, wait=True)


def _id(engine, path: Path) -> int:
    with engine.connect() as conn:
        return conn.execute(E.select().where(E.c.path == str(path))).mappings().one()["id"]


def _outcome_summary(row) -> dict:
    return row["summary"]["rules"]["extract"]["outcomes"][0]


def test_documents_are_extracted_others_not_applicable_and_a_bad_one_is_an_outcome_error(engine, library, fake,
                                                                                          monkeypatch):
    monkeypatch.setenv("ASSAY_OCR", "off")
    svc = _service(engine, library)
    try:
        row = _run(svc, _plan(library))
    finally:
        svc.shutdown()
    summary = _outcome_summary(row)
    # alpha.md, beta.txt, code.py extracted; locked.pdf failed; photo.jpg and scan.png (OCR off) not applicable
    assert sorted(fake.asked) == ["alpha.md", "beta.txt", "code.py", "locked.pdf"]
    assert summary["applied"] == 3 and summary["errors"] == 1 and summary["unchanged"] == 2
    assert row["status"] == "partial" and "1 outcome error" in row["error_message"]
    assert any("FILTER_FAILED: encrypted PDF" in s for s in summary["error_samples"])

    alpha = store_docs.document_row(engine, _id(engine, library / "notes" / "alpha.md"))
    assert alpha["status"] == "ok" and alpha["lines"] == 3 and not alpha["stale"]
    assert list(store_docs.read_pages(engine, alpha["entry_id"])) == [(1, "# Alpha\nthe alpha line\n", False)]
    locked = store_docs.document_row(engine, _id(engine, library / "locked.pdf"))
    assert locked["status"] == "error" and locked["error_code"] == FILTER_FAILED and locked["error"] == "encrypted PDF"
    assert store_docs.document_row(engine, _id(engine, library / "photo.jpg")) is None


def test_unchanged_documents_are_never_extracted_again_and_a_touched_one_is(engine, library, fake, monkeypatch):
    monkeypatch.setenv("ASSAY_OCR", "off")
    svc = _service(engine, library)
    try:
        _run(svc, _plan(library))
        fake.asked.clear()
        again = _run(svc, _plan(library))
        assert fake.asked == []  # the failed one too: the same bytes fail the same way
        assert _outcome_summary(again)["skipped_unchanged_entries"] == 4
        beta = library / "notes" / "beta.txt"
        beta.write_text("beta text changed\n")
        os.utime(beta, (1_700_000_000, 1_700_000_000))
        third = _run(svc, _plan(library))
    finally:
        svc.shutdown()
    assert fake.asked == ["beta.txt"] and _outcome_summary(third)["applied"] == 1
    pages = list(store_docs.read_pages(engine, _id(engine, library / "notes" / "beta.txt")))
    assert pages == [(1, "beta text changed\n", False)]


def test_the_outcome_ocr_option_decides_whether_images_of_text_are_read(engine, library, fake, monkeypatch):
    monkeypatch.setenv("ASSAY_OCR", "off")
    svc = _service(engine, library)
    try:
        _run(svc, _plan(library, when="extension = .png", ocr=True))
    finally:
        svc.shutdown()
    assert fake.asked == ["scan.png"]
    scan = store_docs.document_row(engine, _id(engine, library / "scan.png"))
    assert scan["status"] == "ok" and scan["ocr_pages"] == 1
    # the options are part of the work key: with OCR switched off the image is not applicable any more
    assert ex.work_key(1, 2.0, ex.options_for(None)) != scan["work_key"]


def _rows(engine, root: Path) -> list:
    with engine.connect() as conn:
        return conn.execute(E.select().where(E.c.path.like(f"{root}/%")).order_by(E.c.path)).mappings().all()


def test_results_are_written_in_chunks_as_they_arrive(engine, library, fake, monkeypatch):
    monkeypatch.setenv("ASSAY_OCR", "off")
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs

    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(library)), root=str(library))
    writes: list[int] = []
    run = ex.ExtractRun(extract=fake, write_documents=2, on_write=writes.append)
    result = ex.extract_rows(engine, _rows(engine, library), options=ex.options_for(None), run=run)
    assert writes == [2, 2]  # alpha, beta | code, locked
    assert result.applied == 3 and [r for _, r in result.errors] == ["FILTER_FAILED: encrypted PDF"]
    # work started outside plans is recorded too, without an execution
    from sqlalchemy import select

    from store.models import OutcomeRecord

    with engine.connect() as conn:
        records = conn.execute(select(OutcomeRecord.__table__)).mappings().all()
    assert sorted(r["status"] for r in records) == ["applied", "applied", "applied", "error"]
    assert all(r["execution_id"] is None and r["outcome_type"] == "extract_text" for r in records)


def test_a_cancelled_batch_keeps_what_finished_and_stops(engine, library, fake, monkeypatch):
    monkeypatch.setenv("ASSAY_OCR", "off")
    from flows.index.flow import run_index_job
    from flows.core.outcomes import Cancelled
    from store import jobs as store_jobs

    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(library)), root=str(library))
    rows = _rows(engine, library)
    done: list[str] = []
    ctx = RunContext(evaluate=lambda c, r: True, rule="extract", should_cancel=lambda: len(done) >= 2,
                     on_item=done.append)
    executor = ex.TextExtractor(ex.ExtractRun(extract=fake))
    with pytest.raises(Cancelled):
        executor.run_batch(engine, _plan(library).rules[0].outcomes[0], rows, ctx)
    assert len(fake.asked) == 2
    kept = [r for r in rows if store_docs.document_row(engine, r["id"]) is not None]
    assert [os.path.basename(r["path"]) for r in kept] == [os.path.basename(p) for p in done]


def test_an_entry_deleted_while_it_was_extracted_is_dropped(engine, library, monkeypatch):
    monkeypatch.setenv("ASSAY_OCR", "off")
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs

    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(library)), root=str(library))
    rows = [r for r in _rows(engine, library) if r["name"] in ("alpha.md", "beta.txt")]
    fake = FakeExtraction()

    def deleting(tasks, options, *, should_cancel):
        for entry_id, extracted in fake(tasks, options, should_cancel=should_cancel):
            if extracted.path.endswith("alpha.md"):
                with engine.begin() as conn:
                    conn.execute(E.delete().where(E.c.id == entry_id))
            yield entry_id, extracted

    result = ex.extract_rows(engine, rows, options=ex.options_for(None), run=ex.ExtractRun(extract=deleting))
    assert result.applied == 2 and not result.errors
    assert store_docs.document_row(engine, rows[0]["id"]) is None
    assert store_docs.document_row(engine, rows[1]["id"])["status"] == "ok"


def test_the_executor_is_registered_and_refuses_nothing_but_documents():
    from flows.core.capability import load_capabilities

    load_capabilities()
    assert isinstance(EXECUTORS["extract_text"], ex.TextExtractor)
    options = ex.options_for(None)
    row = {"kind": "file", "name": "x.pdf"}
    assert ex.applicable(row, options)
    assert not ex.applicable({**row, "kind": "symlink"}, options)
    assert not ex.applicable({**row, "name": "x.bin"}, options)
    assert ex.applicable({**row, "name": "Makefile"}, options)
