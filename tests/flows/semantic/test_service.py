"""index_files / update_index as plan executions: paths and options checked with reference 002's codes, a visible
plan per collection, maxFiles applied by path with a note, background runs followed by their execution, single-file
updates (modified, deleted, outside), and a collection's statistics. The fake encoder stands in for the model."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from sqlalchemy import select

from flows.plans.service import PlanService
from flows.core.roots import Roots
from flows.semantic import service
from store import plans as store_plans
from store import semantic as store_sem
from store.entries import T
from store.errors import DocumentError, InvalidInput
from store.models import Chunk

K = Chunk.__table__


def _write(path: Path, text: str, at: float = 1_700_000_000) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    os.utime(path, (at, at))
    return path


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "root"
    _write(root / "docs" / "a.md", "# Apples\n\nApples grow on trees in the orchard.\n")
    _write(root / "docs" / "b.txt", "Bicycles have two wheels and a chain.\n")
    _write(root / "docs" / "sub" / "c.txt", "Canoes float on calm lakes.\n")
    _write(root / "docs" / "d.py", "def dance():\n    return 'salsa'\n")
    _write(root / "elsewhere" / "e.txt", "Elephants remember.\n")
    return root


@pytest.fixture
def plans(engine, root: Path):
    svc = PlanService(engine, Roots.of([str(root)]), use_prefect=False)
    yield svc
    svc.shutdown()


def _texts(engine, path: Path) -> list[str]:
    with engine.connect() as conn:
        return list(conn.execute(select(K.c.text).join(T, T.c.id == K.c.entry_id).where(T.c.path == str(path))
                                 .order_by(K.c.chunk_index)).scalars())


def _code(exc_info) -> str:
    return exc_info.value.code


# --- checks ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("given, what", [
    ("/nowhere/at/all", "outside the allowed roots"),
    ("docs/missing", "does not exist"),
    ("docs/a.md", "is a file, not a folder"),
    ("", "must be a folder"),
    ("../..", "outside the allowed roots"),
])
def test_a_folder_that_is_missing_a_file_or_outside_the_roots_is_invalid_path(plans, root, given, what,
                                                                                fake_encoder):
    with pytest.raises(DocumentError) as err:
        service.index_files(plans, given)
    assert _code(err) == "INVALID_PATH" and what in err.value.message
    assert str(root) in err.value.message or "does not exist" in what or "file" in what


def test_a_relative_folder_is_taken_from_the_roots(plans, root, fake_encoder):
    out = service.index_files(plans, "docs")
    assert out["folder"] == str(root / "docs") and out["status"] == "success"


def test_file_types_in_any_form_become_extensions_and_unsupported_ones_are_named(plans, root, fake_encoder):
    assert service.file_extensions([".MD", "txt", "*.Txt", " md "]) == [".md", ".txt"]
    assert ".pdf" in service.file_extensions(None) and ".jpg" not in service.file_extensions(None)
    with pytest.raises(DocumentError) as err:
        service.index_files(plans, str(root / "docs"), file_types=[".md", ".xyz", "exe"])
    assert _code(err) == "UNSUPPORTED_FORMAT"
    assert "'.xyz'" in err.value.message and "'exe'" in err.value.message and ".md" in err.value.message
    assert "'.md'" not in err.value.message.split(";")[0]


@pytest.mark.parametrize("options, field", [
    ({"chunk_size": 100, "overlap": 100}, "overlap"),
    ({"chunk_size": 10}, "chunkSize"),
    ({"max_files": 0}, "maxFiles"),
    ({"max_files": 1_000_001}, "maxFiles"),
    ({"overlap": -1}, "overlap"),
])
def test_options_out_of_range_name_the_option(plans, root, options, field, fake_encoder):
    with pytest.raises(InvalidInput) as err:
        service.index_files(plans, str(root / "docs"), **options)
    assert err.value.field == field and field in err.value.message


# --- index_files ----------------------------------------------------------------------------------------------------


def test_index_files_runs_a_visible_plan_and_reports_what_it_did(plans, root, engine, fake_encoder):
    out = service.index_files(plans, str(root / "docs"), file_types=["md", "txt"], chunk_size=200, overlap=20)
    assert out["status"] == "success" and out["collection"] == "default"
    assert (out["files_matched"], out["files_indexed"], out["files_unchanged"], out["files_failed"]) == (3, 3, 0, 0)
    assert out["chunks_added"] == out["chunks_total"] == 3 and out["documents_total"] == 3
    assert out["errors"] == [] and "note" not in out and out["elapsed_ms"] >= 0
    assert _texts(engine, root / "docs" / "d.py") == []  # .py was not asked for
    assert _texts(engine, root / "elsewhere" / "e.txt") == []  # nor another folder

    plan = store_plans.get_plan(engine, name="index-files-default")
    assert "index_files" in plan["description"] and "default" in plan["description"]
    execution = store_plans.get_execution(engine, execution_id=out["execution_id"])
    assert execution["plan_name"] == "index-files-default" and execution["status"] == "success"

    again = service.index_files(plans, str(root / "docs"), file_types=["md", "txt"], chunk_size=200, overlap=20)
    assert (again["files_indexed"], again["files_unchanged"], again["chunks_added"]) == (0, 3, 0)
    assert again["chunks_total"] == 3

    stats = service.collection_stats(engine, "default")
    assert stats["folders"] == [str(root / "docs")] and (stats["documents"], stats["chunks"]) == (3, 3)
    assert (stats["model"], stats["chunk_size"], stats["overlap"]) == (fake_encoder.model, 200, 20)


def test_max_files_indexes_the_first_files_by_path_and_says_how_many_were_left_out(plans, root, engine,
                                                                                      fake_encoder):
    out = service.index_files(plans, str(root / "docs"), max_files=2)
    assert out["files_matched"] == 4 and out["files_indexed"] == 2
    assert "2 matching file(s) left out" in out["note"]
    indexed = [p for p in ("a.md", "b.txt", "d.py", "sub/c.txt") if _texts(engine, root / "docs" / p)]
    assert indexed == ["a.md", "b.txt"]


def test_without_waiting_the_answer_names_the_execution_to_follow(plans, root, engine, fake_encoder):
    progress: list[dict] = []
    out = service.index_files(plans, str(root / "docs"), wait=False, collection="notes", on_progress=progress.append)
    assert out["status"] == "running" and out["execution_id"]
    row = plans.wait(out["execution_id"], timeout=60)
    assert row["status"] == "success" and row["plan_name"] == "index-files-notes"
    assert service.collection_stats(engine, "notes")["documents"] == 4
    stages = [p["stage"] for p in progress]
    assert stages[0] == f"index {root / 'docs'}" and any(s.startswith("embed ") for s in stages)


def test_a_collection_of_another_model_is_refused_before_anything_runs(plans, root, engine, fake_encoder,
                                                                      monkeypatch):
    service.index_files(plans, str(root / "docs"))
    monkeypatch.setenv("ASSAY_EMBED_MODEL", "another-model")
    with pytest.raises(DocumentError) as err:
        service.index_files(plans, str(root / "docs"))
    assert _code(err) == "MODEL_MISMATCH" and "another-model" in err.value.message


# --- update_index ---------------------------------------------------------------------------------------------------


def test_update_index_needs_an_existing_collection(plans, root, fake_encoder):
    with pytest.raises(DocumentError) as err:
        service.update_index(plans, str(root / "docs"), ["a.md"], collection="nothing")
    assert _code(err) == "INDEX_NOT_FOUND"


def test_update_index_does_only_the_changed_files(plans, root, engine, fake_encoder):
    docs = root / "docs"
    service.index_files(plans, str(docs))
    fake_encoder.encoded.clear()
    _write(docs / "a.md", "# Apples\n\nApples are now pressed into cider.\n", at=1_700_000_900)
    (docs / "b.txt").unlink()
    _write(docs / "new.md", "Nectarines are new here.\n")
    _write(docs / "unseen.md", "Not in the list of changes.\n")

    out = service.update_index(plans, str(docs), [str(docs / "a.md"), "b.txt", "new.md", "sub/c.txt",
                                                  str(root / "elsewhere" / "e.txt"), "/etc/passwd", "typo.md"])
    assert (out["updated"], out["added"], out["removed"], out["unchanged"], out["failed"]) == (1, 1, 1, 1, 0)
    errors = {e["path"]: e["error"] for e in out["errors"]}
    assert errors.keys() == {str(root / "elsewhere" / "e.txt"), "/etc/passwd", str(docs / "typo.md")}
    assert errors.pop(str(docs / "typo.md")).startswith("DOCUMENT_NOT_FOUND")
    assert all(e.startswith("INVALID_PATH") for e in errors.values())
    assert "cider" in _texts(engine, docs / "a.md")[0]
    assert _texts(engine, docs / "b.txt") == [] and _texts(engine, docs / "new.md")
    assert _texts(engine, docs / "unseen.md") == []  # not named: not done
    assert sorted(fake_encoder.encoded) == sorted(_texts(engine, docs / "a.md") + _texts(engine, docs / "new.md"))
    assert (out["documents_total"], out["chunks_total"]) == (4, 4)  # a, new, c, d


def test_the_plan_runs_as_a_prefect_flow(engine, root, fake_encoder):
    """The one run through real Prefect: index_files is a plan execution like any other."""
    svc = PlanService(engine, Roots.of([str(root)]), use_prefect=True)
    try:
        out = service.index_files(svc, str(root / "docs"), file_types=[".txt"])
    finally:
        svc.shutdown()
    assert out["status"] == "success" and out["files_indexed"] == 2, out


def test_with_the_real_model_a_question_finds_its_document(plans, root, engine, real_encoder):
    from flows.semantic import vectors

    out = service.index_files(plans, str(root / "docs"), collection="real")
    assert out["status"] == "success" and out["files_indexed"] == 4
    coll = store_sem.get_collection(engine, "real")
    assert (coll["model"], coll["dim"]) == (real_encoder.model, real_encoder.dim)
    index = vectors.index_for(engine, coll)
    for question, expected in [("Which fruit grows in an orchard?", "a.md"), ("boats on a lake", "c.txt"),
                               ("a vehicle with pedals", "b.txt")]:
        (chunk_id, _score), *_ = index.search(real_encoder.encode_query(question), 3)
        assert store_sem.chunk_rows(engine, [chunk_id])[chunk_id]["path"].endswith(expected), question


def test_a_folder_without_matching_files_is_a_success_with_nothing_to_do(plans, root, engine, fake_encoder):
    out = service.index_files(plans, str(root / "elsewhere"), file_types=["md"])
    assert (out["status"], out["files_matched"], out["files_indexed"]) == ("success", 0, 0)
    assert "message" not in out
    out = service.update_index(plans, str(root / "docs"), ["d.py"])  # not a type the plan embeds
    assert (out["status"], out["unchanged"], out["errors"]) == ("success", 1, [])


@pytest.mark.parametrize("status, message, reported", [
    ("success", None, "success"), ("partial", "2 outcome error(s), 3 applied; see ...", "partial"),
    ("partial", "nothing matched", "success"), ("error", "cancelled on request; outcomes applied so far were kept",
                                                "cancelled"),
    ("error", "MODEL_MISMATCH ...", "error"), ("running", None, "running")])
def test_an_executions_status_is_reported_in_the_tools_words(status, message, reported):
    assert service.execution_status({"status": status, "error_message": message}) == reported


def test_a_cancelled_index_keeps_what_it_wrote_and_says_cancelled(plans, root, engine, fake_encoder, monkeypatch):
    monkeypatch.setenv("ASSAY_EMBED_BATCH", "1")
    encode = fake_encoder.encode

    def encode_then_cancel(texts, **kw):  # the first encode batch asks the running execution to stop
        out = encode(texts, **kw)
        rows, _ = store_plans.list_executions(engine, status="running", limit=5)
        for row in rows:
            plans.cancel(row["execution_id"])
        return out

    monkeypatch.setattr(fake_encoder, "encode", encode_then_cancel)
    out = service.index_files(plans, str(root / "docs"))
    assert out["status"] == "cancelled" and "cancelled" in out["message"]
    assert out["files_indexed"] == 1 and out["chunks_total"] == 1  # the first file, written before the stop
