"""Reference 004's operator tools (group "admin") through an in-process MCP client, on SQLite and PostgreSQL: the
server's introspection, the job tools over plans, sources and runs, the integrity check and its repairs, the search
indexes rebuilt, the caches cleared and the settings shown with their secrets hidden."""

from __future__ import annotations

import json
import logging
import os

import anyio
import pytest
from sqlalchemy import insert, select

from mcp import Client

from flows.documents.search import search
from flows.semantic import vectors as semantic_vectors
from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from mcp_server.tools import admin_state
from store import cache
from store import jobs as store_jobs
from store.models import Artifact, Entry
from store.semantic import get_collection
from tests.conftest import ToolFailed, call, index_sync, wait_for
from tests.flows.documents.test_search import add_documents
from tests.flows.semantic.test_vectors import populate

A, E = Artifact.__table__, Entry.__table__
GROUPS = ["admin", "plans", "sources", "navigation", "resource-sets"]
ADMIN_TOOLS = {"get_server_info", "get_memory_stats", "list_active_sessions", "get_recent_requests", "list_jobs",
               "get_job_history", "trigger_job", "enable_job", "disable_job", "get_recent_errors", "check_integrity",
               "reload_search_index", "clear_cache", "get_config"}


@pytest.fixture
def settings(request, store_backend, tree, data_dir, tmp_path) -> Settings:
    """The conftest's settings, with the admin group served (a server without auth lists it only when named) and
    a model cache of the test's own (clear_cache models empties it)."""
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else None
    return Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, database_url=url, tool_groups=GROUPS,
                    semantic={"model_cache": str(tmp_path / "models")})


@pytest.fixture(autouse=True)
def fresh_vector_indexes():
    semantic_vectors.clear_cache()
    yield
    semantic_vectors.clear_cache()


async def failure(client, tool: str, args: dict | None = None) -> str:
    with pytest.raises(ToolFailed) as err:
        await call(client, tool, args)
    return str(err.value)


def plan_of(tree, name: str = "photos-plan") -> dict:
    return {"name": name, "sources": [{"name": "photos", "type": "filesystem.index", "target_set": "photos",
                                       "config": {"path": str(tree / "Photos"), "recursive": True}}],
            "outcomes": [{"type": "selection_set", "selectionSetName": "seen", "operation": "add"}]}


# --- server introspection -----------------------------------------------------------------------------------------


async def test_every_operator_tool_is_listed_with_annotations_that_fit_it(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert ADMIN_TOOLS <= set(tools)
    for name in ("get_server_info", "get_memory_stats", "list_active_sessions", "get_recent_requests", "list_jobs",
                 "get_job_history", "get_recent_errors", "get_config"):
        assert tools[name].annotations.read_only_hint is True, name
    for name in ("clear_cache", "check_integrity"):
        assert tools[name].annotations.destructive_hint is True, name
    assert tools["trigger_job"].annotations.read_only_hint is False
    assert set(tools["get_job_history"].input_schema["properties"]) == {"job_id", "limit"}
    assert tools["clear_cache"].input_schema["required"] == ["cache"]


async def test_server_info_describes_the_server_and_counts_its_requests(client, app):
    await call(client, "list_jobs")
    info = await call(client, "get_server_info")
    assert info["version"] == "0.1.0" and info["pid"] == os.getpid() and info["transport"] == "stdio"
    assert info["address"] is None and info["auth"]["required"] is False and info["auth"]["methods"] == []
    assert "admin" in info["auth"]["local_permissions"]
    assert info["store"]["backend"] == app.engine.dialect.name and info["tool_groups"] == GROUPS
    assert info["roots"] == list(app.roots.paths) and info["prefect_url"] is None
    assert info["uptime_seconds"] >= 0 and info["requests"]["ok"] >= 1 and info["sessions"] == 1
    assert info["audit_url"].endswith("audit.db")
    if app.engine.dialect.name == "postgresql":
        assert ":***@" in info["store"]["url"] and "secret" not in json.dumps(info)


async def test_memory_stats_measure_the_process_the_pool_and_each_kind_of_file(client, app, tree):
    index_sync(app, tree)
    stats = await call(client, "get_memory_stats")
    assert stats["process"]["rss_bytes"] > 0 and stats["process"]["threads"] >= 1
    assert stats["pool"]["status"]
    assert set(stats["disk"]) == {"store", "artifact_cache", "text_index", "vector_index", "model_exports"}
    assert stats["disk"]["store"]["bytes"] > 0 and stats["problems"] == []
    assert stats["text_index"]["pending"] == 0 and stats["vector_index"]["collections"] == []
    assert stats["counts"]["sessions"] == 1 and stats["counts"]["recent_requests"] >= 0


async def test_sessions_and_recent_requests_show_the_calls_made(client):
    await call(client, "list_jobs")
    with pytest.raises(ToolFailed):
        await call(client, "get_job_history", {"job_id": "plan:none"})
    sessions = await call(client, "list_active_sessions")
    assert sessions["total"] == sessions["active"] == 1
    only = sessions["sessions"][0]
    assert only["id"] == "stdio" and only["user"] == "local" and only["requests"] >= 2 and only["errors"] >= 1
    requests = await call(client, "get_recent_requests", {"limit": 2})
    assert [r["name"] for r in requests["requests"]] == ["list_active_sessions", "get_job_history"]
    assert requests["requests"][1]["outcome"] == "error" and requests["requests"][1]["error_code"] == "NOT_FOUND"
    assert (await call(client, "get_recent_requests", {"user": "someone-else"}))["requests"] == []


async def test_recent_errors_merge_failed_calls_and_warning_logs_newest_first(client):
    await failure(client, "trigger_job", {"job_id": "plan:missing"})
    logging.getLogger("tests.admin").warning("the disk is nearly full")
    errors = (await call(client, "get_recent_errors"))["errors"]
    sources = [e["source"] for e in errors]
    assert "request" in sources and "log" in sources
    logged = next(e for e in errors if e["message"] == "the disk is nearly full")
    assert logged["level"] == "WARNING" and logged["name"] == "tests.admin"
    failed = next(e for e in errors if e["source"] == "request")
    assert failed["name"] == "trigger_job" and "NOT_FOUND" in failed["message"] and failed["user"] == "local"
    assert [e["time"] for e in errors] == sorted((e["time"] for e in errors), reverse=True)


async def test_recent_errors_include_the_audit_writer_failing(request, store_backend, tree, data_dir, tmp_path):
    url = request.getfixturevalue("pg_database") if store_backend == "postgresql" else None
    missing = tmp_path / "not-there-yet"
    app = AssayApp.create(Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, database_url=url,
                                   tool_groups=GROUPS, guard={"audit_url": f"sqlite:///{missing}/audit.db"}))
    try:
        async with Client(build_server(app)) as client:
            errors = (await call(client, "get_recent_errors"))["errors"]
            info = await call(client, "get_server_info")
    finally:
        missing.mkdir()  # the database comes back: closing writes the backlog at once
        app.close()
        app.engine.dispose()
    audit = [e for e in errors if e["source"] == "audit"]
    assert audit and all("unable to open database file" in e["message"] for e in audit)
    assert any(e["source"] == "log" and e["name"] == "store.audit_writer" for e in errors)  # and its log record
    assert info["audit_url"] == f"sqlite:///{missing}/audit.db"


# --- jobs -----------------------------------------------------------------------------------------------------------


async def test_a_plan_is_triggered_disabled_and_enabled_through_the_job_tools_and_has_a_history(client, app, tree):
    await call(client, "plan-create", plan_of(tree))
    listed = {j["id"]: j for j in (await call(client, "list_jobs"))["jobs"]}
    assert listed["plan:photos-plan"]["enabled"] is True and listed["plan:photos-plan"]["last_run"] is None
    started = await call(client, "trigger_job", {"job_id": "plan:photos-plan"})
    assert started["action"] == "triggered" and started["changed"] is True and started["run"].startswith("job:")
    done = app.plans.wait(started["execution_id"], timeout=60)
    assert done["status"] == "success"
    history = await call(client, "get_job_history", {"job_id": "plan:photos-plan"})
    assert history["total"] == 1 and history["runs"][0]["id"] == f"execution:{started['execution_id']}"
    assert history["runs"][0]["status"] == "success" and history["runs"][0]["counts"]["entries_processed"] == 4
    off = await call(client, "disable_job", {"job_id": "plan:photos-plan"})
    assert (off["status"], off["changed"]) == ("paused", True)
    assert "enable_job plan:photos-plan" in await failure(client, "trigger_job", {"job_id": "plan:photos-plan"})
    listed = {j["id"]: j for j in (await call(client, "list_jobs"))["jobs"]}
    assert listed["plan:photos-plan"]["enabled"] is False
    assert listed["plan:photos-plan"]["last_run"]["status"] == "success"
    on = await call(client, "enable_job", {"job_id": "plan:photos-plan"})
    assert (on["status"], on["changed"]) == ("active", True)
    assert (await call(client, "enable_job", {"job_id": "plan:photos-plan"}))["changed"] is False
    run = await call(client, "get_job_history", {"job_id": started["run"]})
    assert run["type"] == "job" and run["runs"][0]["status"] == "completed"


async def test_a_manual_source_is_triggered_listed_and_disabled(client, app, tree):
    await call(client, "source-create", {"name": "docs", "type": "manual", "path": str(tree / "docs")})
    started = await call(client, "trigger_job", {"job_id": "source:docs"})
    assert started["changed"] is True and started["run"].startswith("job:")
    app.sources.wait("docs", timeout=60)
    history = await call(client, "get_job_history", {"job_id": "source:docs"})
    assert history["total"] == 1 and history["runs"][0]["id"] == started["run"]
    assert history["runs"][0]["status"] == "completed" and history["runs"][0]["counts"]["files"] == 3
    source = {j["id"]: j for j in (await call(client, "list_jobs"))["jobs"]}["source:docs"]
    assert (source["mode"], source["enabled"], source["last_run"]["status"]) == ("manual", True, "completed")
    off = await call(client, "disable_job", {"job_id": "source:docs"})
    assert off["changed"] is True and off["status"] == "stopped"
    source = {j["id"]: j for j in (await call(client, "list_jobs"))["jobs"]}["source:docs"]
    assert source["enabled"] is False


async def test_a_live_source_is_disabled_and_enabled_through_the_job_tools(client, app, tree):
    await call(client, "source-create", {"name": "watched", "type": "live", "path": str(tree / "Videos")})
    watched = {j["id"]: j for j in (await call(client, "list_jobs"))["jobs"]}["source:watched"]
    assert (watched["mode"], watched["enabled"], watched["watching"]) == ("live", True, True)
    off = await call(client, "disable_job", {"job_id": "source:watched"})
    assert (off["changed"], off["status"]) == (True, "stopped") and "stopped watching" in off["message"]
    assert (await call(client, "disable_job", {"job_id": "source:watched"}))["changed"] is False
    on = await call(client, "enable_job", {"job_id": "source:watched"})
    assert (on["changed"], on["status"]) == (True, "running")
    watched = {j["id"]: j for j in (await call(client, "list_jobs"))["jobs"]}["source:watched"]
    assert watched["enabled"] is True and watched["watching"] is True


@pytest.mark.parametrize("tool, job_id, expected", [
    ("get_job_history", "nightly", "plan:<name> (a plan), source:<name> (a source) or job:<id>"),
    ("get_job_history", "42", "did you mean job:42?"),
    ("get_job_history", "plan:nope", "NOT_FOUND: plan 'nope' not found"),
    ("get_job_history", "source:nope", "Job ids: plan:<name>"),
    ("get_job_history", "job:abc", "job ids are whole numbers"),
    ("trigger_job", "job:1", "only plan:<name> and source:<name> jobs can"),
    ("disable_job", "job:1", "cancel-job stops a run"),
])
async def test_a_job_id_that_names_no_job_is_refused_naming_the_accepted_forms(client, tool, job_id, expected):
    assert expected in await failure(client, tool, {"job_id": job_id})


# --- integrity ------------------------------------------------------------------------------------------------------


def add_artifact(app, path: str, rel: str) -> None:
    with app.engine.begin() as conn:
        entry_id = conn.execute(select(E.c.id).where(E.c.path == path)).scalar_one()
        conn.execute(insert(A).values(entry_id=entry_id, type="thumbnail", cache_path=rel, value_json="{}"))


async def test_check_integrity_finds_an_orphan_and_a_missing_cache_file_and_fix_repairs_both(client, app, tree,
                                                                                             data_dir):
    index_sync(app, tree)
    kept = cache.put(data_dir, b"a thumbnail that is there")
    gone = cache.put(data_dir, b"a thumbnail whose file went")
    orphan = cache.put(data_dir, b"a thumbnail nobody points at")
    add_artifact(app, str(tree / "Photos" / "photo.jpg"), kept)
    add_artifact(app, str(tree / "Photos" / "vacation" / "beach.jpg"), gone)
    os.unlink(data_dir / gone)
    report = await call(client, "check_integrity")
    assert report["healthy"] is False and report["fix"] is False and report["repairs"] == []
    found = report["store"]["artifact_cache"]
    assert (found["orphan_files"], found["missing_files"]) == (1, 1) and found["orphan_samples"] == [orphan]
    assert report["text_index"]["matches"] is True and report["vector_index"] == []
    assert (data_dir / orphan).exists()  # a check alone changes nothing
    fixed = await call(client, "check_integrity", {"fix": True})
    assert {(r["action"], r["count"]) for r in fixed["repairs"]} == {
        ("removed orphan cache files", 1), ("dropped artifact rows whose file was gone", 1)}
    assert not (data_dir / orphan).exists() and (data_dir / kept).is_file()
    assert all(p.exists() for p in (tree / "Photos" / "photo.jpg", tree / "Photos" / "vacation" / "beach.jpg"))
    again = await call(client, "check_integrity")
    assert again["healthy"] is True and again["problems"] == []
    with app.engine.connect() as conn:
        assert conn.execute(select(A.c.cache_path)).scalars().all() == [kept]


async def test_check_integrity_rebuilds_a_text_index_whose_segment_is_damaged(client, app):
    add_documents(app.engine, {"/lib/a.md": ("markdown", ["alpha beta\ngamma"]),
                               "/lib/b.md": ("markdown", ["delta epsilon"])})
    assert search(app.engine, "gamma", under=["/lib"]).total_matches == 1  # indexed into a segment
    stats = await call(client, "get_memory_stats")
    segment = next(p for p in os.scandir(stats["text_index"]["directory"]) if p.name.startswith("seg-"))
    with open(segment.path, "r+b") as f:
        f.seek(-8, os.SEEK_END)
        f.write(b"\xff" * 8)
    report = await call(client, "check_integrity")
    text = report["text_index"]
    assert text["matches"] is False and text["corrupt_segments"][0]["segment"] == segment.name
    assert any("text index does not match" in p for p in report["problems"])
    fixed = await call(client, "check_integrity", {"fix": True})
    assert [r["target"] for r in fixed["repairs"]] == ["text_index"]
    wait_for(lambda: search(app.engine, "epsilon", under=["/lib"]).total_matches == 1, what="the rebuilt index")
    assert (await call(client, "check_integrity"))["text_index"]["matches"] is True


# --- search indexes and caches ---------------------------------------------------------------------------------------


async def test_reload_search_index_rebuilds_both_indexes_and_search_keeps_working(client, app):
    add_documents(app.engine, {"/lib/c.md": ("markdown", ["zeta eta theta"])})
    assert search(app.engine, "theta", under=["/lib"]).total_matches == 1
    collection, _ = populate(app.engine, "notes", files=3, per_file=4)
    reloaded = await call(client, "reload_search_index")
    assert reloaded["background"] is True and "get_memory_stats" in reloaded["follow"]
    assert [(s["index"], s["name"], s["pending"]) for s in reloaded["started"]] == [
        ("text", None, 1), ("vector", "notes", 12)]

    for _ in range(400):  # bounds a hang only (20 s)
        stats = await call(client, "get_memory_stats")
        vectors = stats["vector_index"]["collections"]
        if stats["text_index"]["pending"] == 0 and vectors and vectors[0]["ready"]:
            break
        await anyio.sleep(0.05)
    assert stats["text_index"]["pending"] == 0 and vectors[0]["indexed"] == 12
    assert search(app.engine, "theta", under=["/lib"]).total_matches == 1
    checked = await call(client, "check_integrity")
    assert [v["status"] for v in checked["vector_index"]] == ["ok"] and checked["text_index"]["matches"]
    only_text = await call(client, "reload_search_index", {"index": "text"})
    assert [s["index"] for s in only_text["started"]] == ["text"]


async def test_clear_cache_thumbnails_deletes_the_cache_files_and_their_rows_only(client, app, tree, data_dir):
    index_sync(app, tree)
    rel = cache.put(data_dir, b"thumbnail bytes")
    add_artifact(app, str(tree / "Photos" / "photo.jpg"), rel)
    (data_dir / "cache" / "README").write_text("not a cache path")
    cleared = await call(client, "clear_cache", {"cache": "thumbnails"})
    assert (cleared["files"], cleared["bytes"], cleared["rows"]) == (1, len(b"thumbnail bytes"), 1)
    assert not (data_dir / rel).exists() and (data_dir / "cache" / "README").exists()
    assert (tree / "Photos" / "photo.jpg").exists()


async def test_clearing_the_thumbnails_is_refused_while_classification_is_in_flight(client, app, data_dir):
    rel = cache.put(data_dir, b"written by a worker, its row not committed yet")
    store_jobs.create_job(app.engine, root="/x", kind="classify")  # pending: a worker may be about to commit
    assert "classification is running" in await failure(client, "clear_cache", {"cache": "thumbnails"})
    assert (data_dir / rel).is_file()


async def test_clear_cache_of_the_indexes_models_and_memory_says_what_was_freed(client, app, settings):
    populate(app.engine, "notes", files=2, per_file=3)
    semantic_vectors.index_for(app.engine, get_collection(app.engine, "notes")).load()  # its files written
    cleared = await call(client, "clear_cache", {"cache": "vector-index"})
    assert cleared["files"] >= 2 and cleared["bytes"] > 0
    assert [v["status"] for v in (await call(client, "check_integrity"))["vector_index"]] == ["missing"]
    export = settings.semantic.model_cache / "all-MiniLM-L6-v2-onnx"
    export.mkdir(parents=True)
    (export / "model.onnx").write_bytes(b"x" * 100)
    models = await call(client, "clear_cache", {"cache": "models"})
    assert (models["files"], models["bytes"]) == (1, 100) and not export.exists()
    memory = await call(client, "clear_cache", {"cache": "memory"})
    assert memory["files"] == 0 and "vector indexes" in memory["cleared"]
    add_documents(app.engine, {"/lib/d.md": ("markdown", ["iota kappa"])})
    assert search(app.engine, "kappa", under=["/lib"]).total_matches == 1
    text = await call(client, "clear_cache", {"cache": "text-index"})
    assert text["files"] >= 1 and text["bytes"] > 0
    wait_for(lambda: search(app.engine, "kappa", under=["/lib"]).total_matches == 1, what="the rebuilt text index")


async def test_clear_cache_refuses_an_unknown_cache_naming_the_accepted_ones(client):
    message = await failure(client, "clear_cache", {"cache": "everything"})
    for name in ("thumbnails", "text-index", "vector-index", "models", "memory"):
        assert name in message


# --- settings ---------------------------------------------------------------------------------------------------------


async def test_get_config_shows_the_effective_settings_with_the_stores_password_hidden(client, app):
    shown = await call(client, "get_config")
    assert shown["settings"]["tools"]["groups"] == GROUPS and shown["settings"]["server"]["transport"] == "stdio"
    assert shown["derived"]["effective_roots"] == app.settings.effective_roots
    if app.engine.dialect.name == "postgresql":
        assert "secret" not in json.dumps(shown) and ":***@" in shown["settings"]["database"]["url"]
        assert "database.url" in shown["redacted"] and "derived.store_url" in shown["redacted"]


def test_config_hides_url_passwords_and_every_key_naming_a_secret():
    settings = Settings(data_dir="/tmp/assay-config", database_url="postgresql+psycopg://me:hunter2@db/assay",
                        guard={"audit_url": "postgresql://audit:s3cret@db/audit"})
    hidden: list[str] = []
    shown = admin_state.redacted({**settings.model_dump(mode="json"),
                                  "extra": {"client_secret": "x", "api-token": ["y"], "tokens": None}}, "", hidden)
    assert shown["database"]["url"] == "postgresql+psycopg://me:***@db/assay"
    assert shown["guard"]["audit_url"] == "postgresql://audit:***@db/audit"
    assert shown["extra"] == {"client_secret": "[redacted]", "api-token": "[redacted]", "tokens": None}
    assert shown["server"]["cors_credentials"] is True  # a flag named like a secret is none
    assert sorted(hidden) == ["database.url", "extra.api-token", "extra.client_secret", "guard.audit_url"]
    assert "hunter2" not in json.dumps(shown) and "s3cret" not in json.dumps(shown)
