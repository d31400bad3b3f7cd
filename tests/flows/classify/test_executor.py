"""The classifier outcome through real plan runs (PlanService, no Prefect): what it writes, what re-runs skip, how
bad files, cancel, chains and short write transactions behave. Most tests put a fake classify function at the pool
seam (fast, countable); the ones marked "real worker" run flows.classify.worker on generated media."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from dsl.model import Plan
from examples import mediagen as media
from flows.classify import executor as cx
from flows.classify.sweep import sweep_cache
from flows.plans.service import PlanService
from flows.core.roots import Roots
from store import metadata as store_metadata
from store.models import Artifact, Entry, MetadataValue
from store.engine import make_engine

A, E, M = Artifact.__table__, Entry.__table__, MetadataValue.__table__


@pytest.fixture
def photos(tmp_path) -> Path:
    root = tmp_path / "photos"
    root.mkdir()
    for i, name in enumerate(["a.jpg", "b.jpg", "c.jpg"]):
        (root / name).write_bytes(f"picture {i} ".encode() * (i + 3))
    (root / "notes.txt").write_text("hello world\n")
    return root


@pytest.fixture
def service(engine, photos):
    svc = PlanService(engine, Roots.of([str(photos)]), use_prefect=False)
    yield svc
    svc.shutdown()


def run(service: PlanService, photos: Path, outcomes: list[dict], **extra) -> dict:
    p = Plan.from_object({"name": "classify", "sources": [{"name": "home", "type": "filesystem.index",
                                                           "config": {"path": str(photos)}}],
                          "outcomes": outcomes, **extra})
    service.save(p, create=None)
    return service.execute(p, wait=True)


ALL = [{"type": "classifier", "classifierOperation": "all"}]


def entry_id(engine, path: Path) -> int:
    with engine.connect() as conn:
        return conn.execute(select(E.c.id).where(E.c.path == str(path))).scalar_one()


def metadata_of(engine, path: Path) -> dict:
    with engine.connect() as conn:
        rows = conn.execute(select(M.c.key, M.c.num_value, M.c.text_value)
                            .where(M.c.entry_id == entry_id(engine, path))).all()
    return {k: n if n is not None else t for k, n, t in rows}


def thumbnails(engine, path: Path) -> list[str]:
    return [a["cache_path"] for a in store_metadata.entry_artifacts(engine, entry_id=entry_id(engine, path))
            if a["type"] == "thumbnail"]


def test_a_plan_run_writes_thumbnails_metadata_rows_and_the_content_hash(service, engine, photos, fake, data_dir):
    row = run(service, photos, ALL)
    assert row["status"] == "success", row
    assert sorted(fake.calls) == ["a.jpg", "b.jpg", "c.jpg", "notes.txt"]
    thumbs = thumbnails(engine, photos / "a.jpg")
    assert len(thumbs) == 1 and (data_dir / thumbs[0]).is_file()
    assert thumbnails(engine, photos / "notes.txt") == []  # not applicable: nothing made, no error
    assert metadata_of(engine, photos / "a.jpg") == {"width": 100 + (photos / "a.jpg").stat().st_size,
                                                     "height": 50, "format": "JPEG"}
    with engine.connect() as conn:
        hashes = dict(conn.execute(select(E.c.name, E.c.hash).where(E.c.kind == "file")).all())
    assert all(h and h.startswith("xxh128:") for h in hashes.values())
    meta = [a for a in store_metadata.entry_artifacts(engine, entry_id=entry_id(engine, photos / "a.jpg"))
            if a["type"] == "metadata"]
    assert meta[0]["value"]["metadata"]["format"] == "JPEG" and meta[0]["value"]["hash"] == hashes["a.jpg"]
    outcome = row["summary"]["rules"]
    assert row["outcomes_applied"] == 4 and not any(o["errors"] for r in outcome.values() for o in r["outcomes"])


def test_re_running_on_unchanged_files_does_no_work(service, engine, photos, fake):
    run(service, photos, ALL)
    fake.calls.clear()
    row = run(service, photos, ALL)
    assert fake.calls == []
    assert row["status"] == "success"
    out = next(iter(row["summary"]["rules"].values()))["outcomes"][0]
    assert out["skipped_unchanged_entries"] == 4 and out["applied"] == 0


def test_work_done_by_one_operation_is_not_redone_by_all(service, engine, photos, fake):
    run(service, photos, [{"type": "classifier", "classifierOperation": "generate_thumbnail"}])
    fake.calls.clear()
    run(service, photos, ALL)  # thumbnails known; metadata and timeline still to do
    assert sorted(fake.calls) == ["a.jpg", "b.jpg", "c.jpg", "notes.txt"]
    fake.calls.clear()
    run(service, photos, [{"type": "classifier", "classifierOperation": "extract_metadata"}])
    assert fake.calls == []


def test_changed_parameters_redo_the_thumbnails(service, engine, photos, fake):
    run(service, photos, [{"type": "classifier", "classifierOperation": "generate_thumbnail"}])
    fake.calls.clear()
    run(service, photos, [{"type": "classifier", "classifierOperation": "generate_thumbnail", "maxWidth": 64}])
    assert sorted(fake.calls) == ["a.jpg", "b.jpg", "c.jpg", "notes.txt"]


def test_a_touched_file_is_redone_its_artifact_replaced_and_the_old_cache_file_swept(service, engine, photos,
                                                                                      fake, data_dir):
    run(service, photos, ALL)
    old = thumbnails(engine, photos / "b.jpg")[0]
    (photos / "b.jpg").write_bytes(b"a new picture entirely")
    os.utime(photos / "b.jpg", (time.time() + 5, time.time() + 5))
    fake.calls.clear()
    run(service, photos, ALL)
    assert fake.calls == ["b.jpg"]
    new = thumbnails(engine, photos / "b.jpg")
    assert len(new) == 1 and new[0] != old
    assert metadata_of(engine, photos / "b.jpg")["width"] == 100 + len(b"a new picture entirely")
    # the execution's end swept the cache: nothing else was in flight, so the replaced thumbnail is gone at once
    assert not (data_dir / old).exists() and (data_dir / new[0]).is_file()
    assert sweep_cache(engine, data_dir).removed == 0


def test_a_bad_file_among_good_ones_ends_partial_with_its_error_counted(service, engine, photos, fake):
    (photos / "bad.jpg").write_bytes(b"\xff\xd8\xff truncated")
    row = run(service, photos, ALL)
    assert row["status"] == "partial"
    assert "1 outcome error(s)" in row["error_message"]
    out = next(iter(row["summary"]["rules"].values()))["outcomes"][0]
    assert out["errors"] == 1 and "thumbnail: cannot identify image file" in out["error_samples"][0]
    assert out["applied"] == 4
    assert len(thumbnails(engine, photos / "a.jpg")) == 1 and thumbnails(engine, photos / "bad.jpg") == []
    fake.calls.clear()
    again = run(service, photos, ALL)
    assert fake.calls == []  # the same bytes would fail the same way: an unchanged bad file is not tried again
    assert next(iter(again["summary"]["rules"].values()))["outcomes"][0]["skipped_unchanged_entries"] == 5
    (photos / "bad.jpg").write_bytes(b"\xff\xd8\xff truncated differently")  # changed: tried again
    run(service, photos, ALL)
    assert fake.calls == ["bad.jpg"]


def test_cancel_mid_batch_stops_submitting_and_keeps_what_finished(service, engine, photos, fake, monkeypatch):
    for i in range(20):
        (photos / f"more{i:02}.jpg").write_bytes(b"x" * (i + 1))
    fake.gate = threading.Event()
    p = Plan.from_object({"name": "classify", "sources": [{"name": "home", "type": "filesystem.index",
                                                           "config": {"path": str(photos)}}], "outcomes": ALL})
    service.save(p, create=None)
    started = service.execute(p)
    from tests.conftest import wait_for

    wait_for(lambda: fake.calls, what="the first file to reach the classifier")
    service.cancel(started["execution_id"] if "execution_id" in started else started["id"])
    fake.gate.set()
    row = service.wait(started["execution_id"] if "execution_id" in started else started["id"], timeout=30)
    assert row["status"] == "error" and "cancelled" in row["error_message"]
    assert len(fake.calls) < 24  # the pool's window, not the whole batch
    with engine.connect() as conn:
        written = conn.execute(select(A.c.entry_id).where(A.c.type == "thumbnail")).all()
    assert 0 < len(written) <= len(fake.calls)


def test_chained_classifier_then_selection_set_works(service, engine, photos, fake):
    row = run(service, photos, [], rules=[{
        "name": "pics", "when": "extension = .jpg",
        "outcomes": [{"type": "chained", "outcomes": [
            {"type": "classifier", "classifierOperation": "extract_metadata"},
            {"type": "selection_set", "selectionSetName": "classified"}]}]}])
    assert row["status"] == "success", row
    from store import sets as store_sets

    found = store_sets.describe_set(engine, name="classified", include_entries=True, limit=100)
    assert sorted(Path(e["path"]).name for e in found["entries"]) == ["a.jpg", "b.jpg", "c.jpg"]
    assert metadata_of(engine, photos / "c.jpg")["height"] == 50


def test_a_later_rule_selects_on_what_the_classifier_wrote(service, engine, photos, fake):
    row = run(service, photos, [], rules=[
        {"name": "classify", "when": "extension = .jpg",
         "outcomes": [{"type": "classifier", "classifierOperation": "extract_metadata"}]},
        {"name": "wide", "when": f"width > {100 + (photos / 'a.jpg').stat().st_size}",
         "outcomes": [{"type": "selection_set", "selectionSetName": "wide"}]}])
    assert row["status"] == "success", row
    from store import sets as store_sets

    found = store_sets.describe_set(engine, name="wide", include_entries=True, limit=100)
    assert sorted(Path(e["path"]).name for e in found["entries"]) == ["b.jpg", "c.jpg"]


def test_results_are_written_in_short_chunks_while_another_connection_can_write(engine, photos, fake, tmp_path,
                                                                                 data_dir):
    for i in range(40):
        (photos / f"p{i:02}.jpg").write_bytes(b"y" * (i + 1))
    from flows.index.indexer import index_tree

    index_tree(engine, str(photos), scan_id=0)
    with engine.connect() as conn:
        rows = conn.execute(select(E).where(E.c.kind == "file").order_by(E.c.path)).mappings().all()
    writes: list[int] = []
    other = make_engine(str(engine.url))
    wrote_between: list[bool] = []

    def on_write(n: int) -> None:  # between two chunk writes no transaction is open: another writer gets in
        writes.append(n)
        with other.begin() as conn:
            conn.execute(E.update().where(E.c.path == str(photos / "notes.txt")).values(scan_error=None))
        wrote_between.append(True)

    run_ = cx.ClassifyRun(classify=fake, pool_mode="thread", write_chunk=16, on_write=on_write)
    result = cx.classify_rows(engine, rows, operations=("thumbnail", "metadata"), params=cx.Params(), run=run_)
    other.dispose()
    assert result.applied == len(rows) and sum(writes) == len(rows)
    assert max(writes) <= 16 and len(writes) >= 3 and len(wrote_between) == len(writes)


def test_force_redoes_work_that_is_already_known(engine, photos, fake):
    from flows.index.indexer import index_tree

    index_tree(engine, str(photos), scan_id=0)
    with engine.connect() as conn:
        rows = conn.execute(select(E).where(E.c.kind == "file")).mappings().all()
    first = cx.classify_rows(engine, rows, operations=("metadata",), params=cx.Params())
    again = cx.classify_rows(engine, rows, operations=("metadata",), params=cx.Params())
    forced = cx.classify_rows(engine, rows, operations=("metadata",), params=cx.Params(), force=True)
    assert (first.applied, again.skipped, forced.applied) == (4, 4, 4)
    assert len(fake.calls) == 8


def test_preferences_set_the_default_thumbnail_size():
    params = cx.params_from(None, {"thumbnail.max_width": 200, "thumbnail.max_height": 100,
                                   "timeline.frame_count": 9})
    assert (params.max_width, params.max_height, params.frame_count, params.quality) == (200, 100, 9, 80)
    from dsl.outcomes import ClassifierOutcome

    params = cx.params_from(ClassifierOutcome(maxWidth=64, quality=50), {"thumbnail.max_width": 200})
    assert (params.max_width, params.max_height, params.quality) == (64, 320, 50)


# --- the real worker ----------------------------------------------------------------------------------------------

needs_worker = pytest.mark.skipif(not Path(cx.__file__).with_name("worker.py").exists(),
                                  reason="flows/classify/worker.py (helper A) is not there yet")


@pytest.fixture
def real(monkeypatch, data_dir):
    monkeypatch.setattr(cx.DEFAULT_RUN, "classify", None)
    monkeypatch.setattr(cx.DEFAULT_RUN, "pool_mode", "thread")
    monkeypatch.setattr("flows.core.capability._data_dir", data_dir)


@needs_worker
@pytest.mark.parametrize("store_backend", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_real_worker_thumbnails_and_metadata_of_a_jpeg_and_a_pdf_on_each_store(request, store_backend, tmp_path,
                                                                               real, data_dir):
    root = tmp_path / "media"
    root.mkdir()
    media.jpeg(root / "photo.jpg", (640, 480))
    media.pdf(root / "guide.pdf", pages=2)
    media.truncated_jpeg(root / "broken.jpg")
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else \
        f"sqlite:///{data_dir / 'real.db'}"
    eng = make_engine(url)
    svc = PlanService(eng, Roots.of([str(root)]), use_prefect=False)
    try:
        row = run(svc, root, [{"type": "classifier", "classifierOperation": "all", "maxWidth": 160,
                               "maxHeight": 160}])
        assert row["status"] == "partial", row  # the truncated JPEG is the one error
        out = next(iter(row["summary"]["rules"].values()))["outcomes"][0]
        assert out["errors"] == 1 and "broken.jpg" not in str(out["applied"])
        meta = metadata_of(eng, root / "photo.jpg")
        assert meta["width"] == 640 and meta["height"] == 480 and meta["exif.Model"] == "X-T4"
        assert metadata_of(eng, root / "guide.pdf")["pages"] == 2
        thumb = thumbnails(eng, root / "photo.jpg")
        from PIL import Image

        with Image.open(data_dir / thumb[0]) as im:
            assert max(im.size) <= 160
        assert thumbnails(eng, root / "guide.pdf")
    finally:
        svc.shutdown()
        eng.dispose()


def test_an_entry_deleted_while_the_pool_works_is_left_out_of_the_write(engine, photos, fake):
    from sqlalchemy import delete

    from flows.index.indexer import index_tree

    index_tree(engine, str(photos), scan_id=0)
    with engine.connect() as conn:
        rows = conn.execute(select(E).where(E.c.kind == "file").order_by(E.c.path)).mappings().all()
    doomed = rows[0]["id"]

    def classify_then_delete(task):
        if task.entry_id == doomed:
            with engine.begin() as conn:
                conn.execute(delete(E).where(E.c.id == doomed))
        return fake(task)

    run_ = cx.ClassifyRun(classify=classify_then_delete, pool_mode="thread")
    result = cx.classify_rows(engine, rows, operations=("thumbnail", "metadata"), params=cx.Params(), run=run_)
    assert result.applied == len(rows) and not result.errors
    with engine.connect() as conn:
        owners = set(conn.execute(select(A.c.entry_id)).scalars())
    assert doomed not in owners and len(owners) == len(rows) - 1
