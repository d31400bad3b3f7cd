"""Reference 004's operator resources through an in-process MCP client, on SQLite and PostgreSQL: logs://recent,
jobs://{job_id}/output and changelog://recent (from the audit log, and without one)."""

from __future__ import annotations

import logging
import time

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ResourceTemplateReference
from sqlalchemy import insert, select

from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from store.models import Entry, OutcomeRecord
from tests.conftest import call, read_json

GROUPS = ["admin", "plans", "sources", "resource-sets"]
E, R = Entry.__table__, OutcomeRecord.__table__


@pytest.fixture
def settings(request, store_backend, tree, data_dir) -> Settings:
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else None
    return Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, database_url=url, tool_groups=GROUPS)


def plan_of(tree) -> dict:
    return {"name": "photos-plan", "sources": [{"name": "photos", "type": "filesystem.index", "target_set": "photos",
                                                "config": {"path": str(tree / "Photos"), "recursive": True}}],
            "outcomes": [{"type": "selection_set", "selectionSetName": "seen", "operation": "add"}]}


async def test_the_operator_resources_are_listed(client):
    uris = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"logs://recent", "changelog://recent"} <= uris
    templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
    assert "jobs://{job_id}/output" in templates


async def test_recent_logs_are_the_servers_log_records_newest_first(client):
    logging.getLogger("tests.operator").warning("first marker")
    logging.getLogger("tests.operator").error("second marker")
    logs = await read_json(client, "logs://recent")
    mine = [r for r in logs["records"] if r["logger"] == "tests.operator"]
    assert [(r["level"], r["message"]) for r in mine] == [("ERROR", "second marker"), ("WARNING", "first marker")]
    assert logs["total"] == len(logs["records"]) <= logs["kept"] and mine[0]["time"].endswith("Z")


async def test_a_plans_output_is_its_latest_execution_with_its_outcome_records(client, app, tree):
    await call(client, "plan-create", plan_of(tree))
    before = await read_json(client, "jobs://plan:photos-plan/output")
    assert before["latest"] is None and "trigger_job plan:photos-plan" in before["note"]
    started = await call(client, "trigger_job", {"job_id": "plan:photos-plan"})
    app.plans.wait(started["execution_id"], timeout=60)
    output = await read_json(client, "jobs://plan%3Aphotos-plan/output")  # URL-encoded: the same job
    assert output["job_id"] == "plan:photos-plan" and output["executions"] == 1
    assert output["latest"]["execution_id"] == started["execution_id"] and output["latest"]["status"] == "success"
    assert output["latest"]["outcomes_applied"] == 4 and output["latest"]["summary"]
    assert output["outcomes"] == {"counts": {}, "failed": []}  # selection sets keep no per-entry records
    with app.engine.begin() as conn:  # as a classifier outcome that failed on one entry records it
        entry = conn.execute(select(E.c.id).where(E.c.path == str(tree / "Photos" / "photo.jpg"))).scalar_one()
        conn.execute(insert(R).values(execution_id=started["execution_id"], entry_id=entry, rule="photos-plan",
                                      outcome_type="classifier", work_key="k", status="error",
                                      detail="ffmpeg is not installed", created_at=time.time()))
    failed = (await read_json(client, "jobs://plan:photos-plan/output"))["outcomes"]
    assert failed["counts"] == {"error": 1}
    assert [(f["path"], f["reason"]) for f in failed["failed"]] == [
        (str(tree / "Photos" / "photo.jpg"), "ffmpeg is not installed")]
    run = await read_json(client, f"jobs://{started['run']}/output")
    assert run["latest"]["status"] == "completed" and run["latest"]["issues"] == []


async def test_a_sources_output_is_its_latest_scan_with_what_it_skipped(client, app, tree):
    await call(client, "source-create", {"name": "docs", "type": "manual", "path": str(tree / "docs")})
    started = await call(client, "trigger_job", {"job_id": "source:docs"})
    app.sources.wait("docs", timeout=60)
    output = await read_json(client, "jobs://source:docs/output")
    assert output["scans"] == 1 and f"job:{output['latest']['id']}" == started["run"]
    assert output["latest"]["status"] == "completed" and output["latest"]["issues"] == []
    assert output["source"]["name"] == "docs" and output["source"]["total_scans"] == 1


@pytest.mark.parametrize("uri, expected", [
    ("jobs://plan:nope/output", "plan 'nope' not found"),
    ("jobs://nightly/output", "is not a job id; use plan:<name>"),
])
async def test_the_output_of_a_job_that_does_not_exist_is_an_error_naming_the_forms(client, uri, expected):
    with pytest.raises(MCPError) as err:
        await client.read_resource(uri)
    assert expected in str(err.value)


async def test_job_ids_of_the_output_template_are_completed(client, tree):
    await call(client, "plan-create", plan_of(tree))
    await call(client, "source-create", {"name": "docs", "type": "manual", "path": str(tree / "docs")})
    ref = ResourceTemplateReference(type="ref/resource", uri="jobs://{job_id}/output")
    assert (await client.complete(ref, {"name": "job_id", "value": "plan:"})).completion.values == ["plan:photos-plan"]
    assert (await client.complete(ref, {"name": "job_id", "value": ""})).completion.values == [
        "plan:photos-plan", "source:docs"]


async def test_the_changelog_lists_the_changes_made_by_whom_not_the_reads(client, app, tree):
    await call(client, "resource-set-create", {"name": "favourites", "description": "the best ones"})
    await call(client, "plan-create", plan_of(tree))
    await call(client, "plan-list")
    await call(client, "list_jobs")
    changelog = await read_json(client, "changelog://recent")
    tools = [c["tool"] for c in changelog["changes"]]
    assert tools == ["plan-create", "resource-set-create"]
    set_created = changelog["changes"][1]
    assert set_created["user"] == "local" and set_created["kind"] == "change" and set_created["session"] == "stdio"
    assert set_created["arguments"] == {"name": "favourites", "description": "the best ones"}
    assert changelog["changes"][0]["time"] >= set_created["time"]


async def test_the_changelog_is_empty_with_a_note_when_auditing_is_off(request, store_backend, tree, data_dir):
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else None
    app = AssayApp.create(Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, database_url=url,
                                   tool_groups=GROUPS, guard={"audit": False}))
    try:
        async with Client(build_server(app)) as client:
            await call(client, "resource-set-create", {"name": "favourites"})
            changelog = await read_json(client, "changelog://recent")
    finally:
        app.close()
        app.engine.dispose()
    assert changelog["changes"] == [] and "auditing is off" in changelog["note"]


async def test_the_changelog_says_why_when_the_audit_log_cannot_be_read(request, store_backend, tree, data_dir,
                                                                        tmp_path):
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else None
    missing = tmp_path / "not-there-yet"
    app = AssayApp.create(Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, database_url=url,
                                   tool_groups=GROUPS, guard={"audit_url": f"sqlite:///{missing}/audit.db"}))
    try:
        async with Client(build_server(app)) as client:
            changelog = await read_json(client, "changelog://recent")
    finally:
        missing.mkdir()  # the database comes back: closing writes the backlog at once
        app.close()
        app.engine.dispose()
    assert changelog["changes"] == [] and "cannot be read" in changelog["note"]
