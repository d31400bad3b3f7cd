"""The sweep after real plan runs with a classifier (PlanService, no Prefect, the fake worker) while other executions
run: a thumbnail a run replaced never stays an orphan on an idle server, and db-diagnose (with the tool's cache
report) is healthy."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import select

from dsl.model import Plan
from flows.classify import sweep
from flows.core.roots import Roots
from flows.plans.execution import finish_failed, open_execution
from flows.plans.service import PlanService
from mcp_server.tools.database import cache_report
from store import metadata as store_metadata
from store import plans as store_plans
from store.diagnostics import diagnose
from store.models import Entry

E = Entry.__table__


@pytest.fixture
def photos(tmp_path) -> Path:
    root = tmp_path / "photos"
    root.mkdir()
    for i, name in enumerate(["a.jpg", "b.jpg"]):
        (root / name).write_bytes(f"picture {i} ".encode() * (i + 3))
    return root


@pytest.fixture
def service(engine, photos):
    svc = PlanService(engine, Roots.of([str(photos)]), use_prefect=False)
    yield svc
    svc.shutdown()


def plan(name: str, photos: Path, outcomes: list[dict]) -> Plan:
    return Plan.from_object({"name": name, "sources": [{"name": "home", "type": "filesystem.index",
                                                        "config": {"path": str(photos)}}], "outcomes": outcomes})


THUMBNAILS = [{"type": "classifier", "classifierOperation": "generate_thumbnail"}]


def thumbnail(engine, path: Path) -> str:
    with engine.connect() as conn:
        entry_id = conn.execute(select(E.c.id).where(E.c.path == str(path))).scalar_one()
    [rel] = [a["cache_path"] for a in store_metadata.entry_artifacts(engine, entry_id=entry_id)
             if a["type"] == "thumbnail"]
    return rel


def replace_thumbnail(service: PlanService, engine, photos: Path) -> str:
    """Run the thumbnail plan, change b.jpg, run it again: returns b.jpg's first thumbnail, now no row's."""
    thumbs = plan("thumbnails", photos, THUMBNAILS)
    service.save(thumbs, create=None)
    assert service.execute(thumbs, wait=True)["status"] == "success"
    old = thumbnail(engine, photos / "b.jpg")
    (photos / "b.jpg").write_bytes(b"a new picture entirely")
    os.utime(photos / "b.jpg", (time.time() + 5, time.time() + 5))
    assert service.execute(thumbs, wait=True)["status"] == "success"
    assert thumbnail(engine, photos / "b.jpg") != old
    return old


def running(service: PlanService, engine, photos: Path, name: str, outcomes: list[dict],
            trigger: str) -> tuple[int, int]:
    """An execution left running, as another process's is while this one's runs end: (execution id, run id)."""
    other = plan(name, photos, outcomes)
    service.save(other, create=None)
    return open_execution(engine, other, trigger=trigger, roots=None)


def wait_gone(path: Path, seconds: float = 20.0) -> bool:
    deadline = time.monotonic() + seconds
    while path.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return not path.exists()


def healthy(engine) -> bool:
    report = diagnose(engine, artifact_cache=cache_report(engine))
    assert report["artifact_cache"]["orphan_files"] == 0, report["warnings"]
    return report["healthy"]


def test_a_watched_plan_running_that_never_classifies_does_not_keep_a_replaced_thumbnail(service, engine, photos,
                                                                                           fake, data_dir):
    execution_id, run_id = running(service, engine, photos, "documents", [
        {"type": "selection_set", "selectionSetName": "docs", "operation": "add"}], trigger="watch")
    old = replace_thumbnail(service, engine, photos)
    assert not (data_dir / old).exists()  # the run's end swept it at once, though the watched plan's run goes on
    assert store_plans.get_execution(engine, execution_id=execution_id)["status"] == "running"
    assert healthy(engine)
    finish_failed(engine, run_id, "stopped")


def test_a_thumbnail_kept_while_another_classifying_run_goes_on_is_swept_once_it_ends(service, engine, photos,
                                                                                      fake, data_dir, monkeypatch):
    monkeypatch.setattr(sweep, "RETRY", 0.02)
    _, run_id = running(service, engine, photos, "elsewhere", THUMBNAILS, trigger="manual")  # on a worker, say
    old = replace_thumbnail(service, engine, photos)
    assert (data_dir / old).is_file()  # that run may be about to commit a row pointing at any young file
    finish_failed(engine, run_id, "its worker was killed")  # ended by the reaper: nothing of its own sweeps
    assert wait_gone(data_dir / old)
    assert healthy(engine)
