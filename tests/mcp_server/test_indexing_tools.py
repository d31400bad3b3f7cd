"""index, job-progress, list-jobs, cancel-job through an in-process MCP client."""

from __future__ import annotations

import anyio
import pytest

from tests.conftest import ToolFailed, call


async def wait_done(client, job_id, timeout=30.0):
    with anyio.fail_after(timeout):
        while True:
            job = await call(client, "job-progress", {"jobId": str(job_id)})
            if job["status"] not in ("pending", "running"):
                return job
            await anyio.sleep(0.05)


async def test_index_async_returns_job_id_and_status_url_at_once(client, tree):
    res = await call(client, "index", {"root": str(tree)})
    assert res["status"] == "pending"
    assert res["statusUrl"] == f"synthesis://jobs/{res['jobId']}"
    job = await wait_done(client, res["jobId"])
    assert job["status"] == "completed"
    assert job["files"] == 10 and job["directories"] == 9
    assert job["progress"] == 100


async def test_index_sync_with_max_age_then_skips_recent_scan(client, tree):
    first = await call(client, "index", {"root": str(tree), "async": False, "maxAge": 300})
    assert first["status"] == "completed" and first["files"] == 10 and first["skipped"] is False
    again = await call(client, "index", {"root": str(tree), "async": False, "maxAge": 300})
    assert again["skipped"] is True
    assert again["files"] == 0 and again["directories"] == 0 and again["totalSize"] == 0
    assert "Use force=true to re-index." in again["skipReason"]
    forced = await call(client, "index", {"root": str(tree), "async": False, "force": True})
    assert forced["skipped"] is False and forced["files"] == 10


async def test_index_of_a_subfolder_is_skipped_when_its_parent_was_just_scanned(client, tree):
    await call(client, "index", {"root": str(tree), "async": False})
    sub = await call(client, "index", {"root": str(tree / "Photos"), "async": False})
    assert sub["skipped"] is True


async def test_index_outside_roots_is_refused_naming_path_and_roots(client, tree):
    with pytest.raises(ToolFailed) as err:
        await call(client, "index", {"root": "/etc"})
    assert "/etc" in str(err.value) and str(tree) in str(err.value)
    with pytest.raises(ToolFailed) as err:
        await call(client, "index", {"root": str(tree / ".." / "..")})
    assert "outside the allowed roots" in str(err.value)


async def test_job_progress_rejects_non_numeric_and_unknown_ids(client):
    with pytest.raises(ToolFailed, match="not a job id"):
        await call(client, "job-progress", {"jobId": "abc"})
    with pytest.raises(ToolFailed, match="no job with id 999"):
        await call(client, "job-progress", {"jobId": "999"})


async def test_list_jobs_filters_by_status_and_progress(client, tree):
    await call(client, "index", {"root": str(tree), "async": False})
    listed = await call(client, "list-jobs", {})
    assert listed["total"] == 1 and listed["jobs"][0]["status"] == "completed"
    assert (await call(client, "list-jobs", {"activeOnly": True}))["total"] == 0
    assert (await call(client, "list-jobs", {"status": "completed", "minProgress": 100}))["total"] == 1
    assert (await call(client, "list-jobs", {"maxProgress": 50}))["total"] == 0
    with pytest.raises(ToolFailed):
        await call(client, "list-jobs", {"status": "done"})


async def test_cancel_job_on_a_finished_job_reports_its_real_status(client, tree):
    res = await call(client, "index", {"root": str(tree), "async": False})
    out = await call(client, "cancel-job", {"jobId": str(res["jobId"])})
    assert out["cancelled"] is False and out["status"] == "completed"
    assert (await call(client, "job-progress", {"jobId": str(res["jobId"])}))["status"] == "completed"


async def test_a_cancelled_index_job_leaves_a_navigable_consistent_store(client, app, tree, monkeypatch):
    import threading

    import flows.index.indexer as indexer_mod
    from tests.flows.index.checks import assert_store_consistent

    big = tree / "big"
    for d in range(6):
        for s in range(3):
            (big / f"d{d}" / f"s{s}").mkdir(parents=True)
            for f in range(150):
                (big / f"d{d}" / f"s{s}" / f"{f}.txt").write_text("x" * f)
    ticked, release = threading.Event(), threading.Event()
    real_tick = indexer_mod._Walk.tick

    def gated_tick(walk):
        ticked.set()
        release.wait(10)  # hold the walk mid-tree (after 2,000 entries) until the test has asked to cancel
        real_tick(walk)

    monkeypatch.setattr(indexer_mod._Walk, "tick", gated_tick)
    started = await call(client, "index", {"root": str(tree)})
    with anyio.fail_after(10):
        while not ticked.is_set():
            await anyio.sleep(0.01)
    running = await call(client, "job-progress", {"jobId": str(started["jobId"])})
    assert running["status"] == "running" and running["progress"] < 100
    out = await call(client, "cancel-job", {"jobId": str(started["jobId"])})
    assert out["cancelled"] is True
    release.set()
    job = await wait_done(client, started["jobId"])
    assert job["status"] == "cancelled"

    rows = assert_store_consistent(app.engine, str(tree))  # parents stored, sizes add up, db-diagnose healthy
    assert job["files"] == sum(r["kind"] == "file" for r in rows) < 2710
    assert job["directories"] == sum(r["kind"] == "directory" for r in rows)
    for folder in (r for r in rows if r["kind"] == "directory"):
        nav = await call(client, "navigate", {"path": folder["path"], "limit": 1})
        assert nav["total"] == sum(r["parent"] == folder["path"] for r in rows)
        assert nav["complete"] is (folder["scan_error"] is None)
    top = await call(client, "navigate", {"path": str(tree)})
    assert top["complete"] is False and "cancelled" in top["scanError"]

    again = await call(client, "index", {"root": str(tree), "async": False})  # no force: the last scan stopped
    assert again["skipped"] is False and again["status"] == "completed"
    rows = assert_store_consistent(app.engine, str(tree))
    assert sum(r["kind"] == "file" for r in rows) == 2710
    assert all(r["scan_error"] is None for r in rows)


async def test_unknown_or_misspelt_parameters_are_refused_naming_them(client, tree):
    with pytest.raises(ToolFailed) as err:
        await call(client, "index", {"root": str(tree), "maxage": 10})
    assert "'maxage'" in str(err.value) and "accepted: root, async, force, maxAge" in str(err.value)
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["index"].input_schema["additionalProperties"] is False
