"""rerun-classifier, classifier-job-progress, list-classifier-jobs through an in-process MCP client, with the real
worker on generated media."""

from __future__ import annotations

import anyio
import pytest

from examples import mediagen as media
from flows.classify import executor as cx
from tests.conftest import ToolFailed, call, index_sync


@pytest.fixture
def photos(tree, data_dir, monkeypatch):
    """Real media in the tree, classified in threads (the process pool is tested in tests/flows/classify)."""
    monkeypatch.setattr(cx.DEFAULT_RUN, "pool_mode", "thread")
    monkeypatch.setattr(cx.DEFAULT_RUN, "classify", None)
    monkeypatch.setattr("flows.core.capability._data_dir", data_dir)
    folder = tree / "Camera"
    folder.mkdir()
    media.jpeg(folder / "one.jpg", (320, 240))
    media.jpeg(folder / "two.jpg", (240, 320), seed=2)
    media.truncated_jpeg(folder / "broken.jpg")
    return folder


async def wait_done(client, job_id, timeout=60.0):
    with anyio.fail_after(timeout):
        while True:
            job = await call(client, "classifier-job-progress", {"jobId": job_id})
            if job["status"] not in ("pending", "running"):
                return job
            await anyio.sleep(0.05)


async def test_rerun_classifier_async_returns_the_job_and_progress_reports_files_and_issues(client, app, photos):
    index_sync(app, photos)
    res = await call(client, "rerun-classifier", {"sourcePath": str(photos), "operations": ["thumbnail", "hash"]})
    assert res["status"] in ("pending", "running")
    assert res["source_path"] == str(photos) and res["sourcePath"] == str(photos)
    assert res["operations"] == ["thumbnail", "metadata"] and res["statusUrl"] == f"synthesis://jobs/{res['id']}"
    job = await wait_done(client, res["jobId"])
    assert job["status"] == "completed" and job["progress"] == 100 and job["files"] == 3 and job["errors"] == 1
    assert [i["path"] for i in job["issues"]] == [str(photos / "broken.jpg")]
    reason = job["issues"][0]["reason"]
    assert reason.startswith("thumbnail: ") and "thumbnail: thumbnail" not in reason  # the operation named once
    assert job["created_at"].endswith("Z") or "T" in job["created_at"]
    listed = await call(client, "list-classifier-jobs", {})
    assert listed["total"] == 1 and listed["jobs"][0]["id"] == job["id"]
    assert set(listed["jobs"][0]) >= {"id", "source_path", "status", "progress", "created_at", "completed_at"}
    index_jobs = await call(client, "list-jobs", {})
    assert all(j["kind"] == "index" for j in index_jobs["jobs"])  # classify jobs stay out of the index list


async def test_rerun_classifier_sync_waits_and_accepts_one_string_and_outcome_names(client, app, photos):
    index_sync(app, photos)
    res = await call(client, "rerun-classifier", {"sourcePath": str(photos / "one.jpg"),
                                                  "operations": "extract_metadata", "async": False})
    assert res["status"] == "completed" and res["files"] == 1 and res["errors"] == 0 and res["issues"] == []
    assert res["operations"] == ["metadata"]
    from sqlalchemy import select

    from store.models import Entry

    with app.engine.connect() as conn:
        h = conn.execute(select(Entry.hash).where(Entry.path == str(photos / "one.jpg"))).scalar_one()
    assert h.startswith("xxh128:")


async def test_list_classifier_jobs_filters_by_status_newest_first(client, app, photos):
    index_sync(app, photos)
    first = await call(client, "rerun-classifier", {"sourcePath": str(photos / "one.jpg"), "async": False,
                                                    "operations": ["metadata"]})
    second = await call(client, "rerun-classifier", {"sourcePath": str(photos / "broken.jpg"), "async": False,
                                                     "operations": ["thumbnail"]})
    assert second["status"] == "failed"
    done = await call(client, "list-classifier-jobs", {"status": "completed"})
    assert [j["id"] for j in done["jobs"]] == [first["id"]] and done["total"] == 1
    both = await call(client, "list-classifier-jobs", {"limit": 1})
    assert [j["id"] for j in both["jobs"]] == [second["id"]] and both["total"] == 2


async def test_bad_arguments_are_refused_saying_what_is_accepted(client, app, photos, tree):
    index_sync(app, photos)
    with pytest.raises(ToolFailed, match="unknown classifier operation 'sharpen'.*thumbnail"):
        await call(client, "rerun-classifier", {"sourcePath": str(photos), "operations": ["sharpen"]})
    with pytest.raises(ToolFailed, match="outside the allowed roots"):
        await call(client, "rerun-classifier", {"sourcePath": "/etc/passwd"})
    (tree / "later.jpg").write_bytes(b"x")
    with pytest.raises(ToolFailed, match="not in the index; index it first"):
        await call(client, "rerun-classifier", {"sourcePath": str(tree / "later.jpg")})
    with pytest.raises(ToolFailed, match="not a job id"):
        await call(client, "classifier-job-progress", {"jobId": "abc"})
    index = await call(client, "index", {"root": str(photos), "async": False, "force": True})
    with pytest.raises(ToolFailed, match="not a classifier job"):
        await call(client, "classifier-job-progress", {"jobId": index["jobId"]})


def test_a_command_line_classify_is_handed_to_the_servers_control_socket(app, photos, data_dir):
    """`assay classify` beside a server sends op "classify" over <data dir>/assay.sock; the server runs the job
    (here without Prefect: the request says prefect false) and streams progress and the result."""
    from mcp_server import control
    from mcp_server.cli import handoff

    index_sync(app, photos)
    sock = control.ControlSocket(app)
    assert sock.start()
    try:
        seen: list[dict] = []
        request = {"op": "classify", "path": str(photos), "operations": ["metadata"], "force": False,
                   "store": app.settings.db_url, "prefect": False}
        result = handoff._job_via_server(data_dir, request, seen.append, None)
        assert result["status"] == "completed" and result["files"] == 3 and result["operations"] == ["metadata"]
        assert seen and seen[-1]["progress"] == 100 and seen[-1]["total"] == 3
        with pytest.raises(handoff.ServerError, match="unknown classifier operation"):
            handoff._job_via_server(data_dir, {**request, "operations": ["blur"]}, seen.append, None)
        with pytest.raises(handoff.NoServer, match="leaves this job to us"):
            handoff.classify_via_server(data_dir, path="/etc", operations=["all"], force=False,
                                        store=app.settings.db_url)
    finally:
        sock.stop()
