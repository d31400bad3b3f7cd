"""source-* tools through an in-process MCP client (reference 000, "Source Management")."""

from __future__ import annotations

import json
import time

import anyio
import pytest

from store.entries import get_entry
from tests.conftest import ToolFailed, call, read_json

TIMEOUT = 20.0


async def poll(fetch, predicate, what: str):
    """Call ``fetch`` until ``predicate`` holds for its result; return that result."""
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        value = await fetch()
        if predicate(value):
            return value
        await anyio.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}; last: {value}")


def live_example(tree) -> dict:
    return {"name": "photos-watch", "type": "live", "path": str(tree / "Photos"), "watch_recursive": True,
            "debounce_ms": 500}


def manual_example(tree) -> dict:
    return {"name": "archive-scan", "type": "manual", "path": str(tree / "docs"), "enabled": False}


async def test_live_reference_example_watches_and_keeps_the_index_current(client, app, tree):
    created = await call(client, "source-create", live_example(tree))
    assert created == {**created, "name": "photos-watch", "type": "live", "path": str(tree / "Photos"),
                       "enabled": True, "status": "running", "watch_recursive": True, "debounce_ms": 500}
    stats = await poll(lambda: call(client, "source-stats", {"name": "photos-watch"}),
                       lambda s: s["total_scans"] == 1, "the catch-up scan")
    assert stats == {**stats, "name": "photos-watch", "type": "live", "status": "running", "entries_indexed": 6}
    assert stats["last_scan_at"].endswith("Z") and isinstance(stats["average_scan_duration_ms"], int)
    assert stats["watcher"]["running"] is True
    new = tree / "Photos" / "new.png"
    new.write_bytes(b"p" * 10)
    await poll(lambda: anyio.to_thread.run_sync(lambda: get_entry(app.engine, path=str(new))), bool,
               "the new photo in the index")
    stats = await poll(lambda: call(client, "source-stats", {"name": "photos-watch"}),
                       lambda s: s["watcher"]["entries_upserted"] >= 1, "the upsert counted")  # after the commit
    assert stats["entries_indexed"] == 7


async def test_manual_reference_example_indexes_once_when_started(client, app, tree):
    created = await call(client, "source-create", manual_example(tree))
    assert created == {**created, "name": "archive-scan", "type": "manual", "enabled": False, "status": "stopped",
                       "total_scans": 0, "last_scan_at": None}
    assert get_entry(app.engine, path=str(tree / "docs" / "readme.md")) is None  # manual: nothing until started
    started = await call(client, "source-start", {"name": "archive-scan"})
    assert started == {**started, "name": "archive-scan", "type": "manual", "status": "running", "started": True}
    assert isinstance(started["job_id"], int)
    await anyio.to_thread.run_sync(lambda: app.sources.wait("archive-scan", timeout=TIMEOUT))
    stats = await call(client, "source-stats", {"name": "archive-scan"})
    assert stats == {"name": "archive-scan", "type": "manual", "status": "stopped", "entries_indexed": 7,
                     "last_scan_at": stats["last_scan_at"], "total_scans": 1,
                     "average_scan_duration_ms": stats["average_scan_duration_ms"], "path": str(tree / "docs"),
                     "last_error": None, "watcher": None}
    assert stats["last_scan_at"].endswith("Z")
    job = await read_json(client, f"synthesis://jobs/{started['job_id']}")
    assert job == {**job, "status": "completed", "root": str(tree / "docs")}
    await call(client, "source-start", {"name": "archive-scan"})
    await anyio.to_thread.run_sync(lambda: app.sources.wait("archive-scan", timeout=TIMEOUT))
    assert (await call(client, "source-stats", {"name": "archive-scan"}))["total_scans"] == 2


async def test_list_and_get_show_every_source_with_status(client, tree):
    await call(client, "source-create", live_example(tree))
    await call(client, "source-create", manual_example(tree))
    listed = await call(client, "source-list")
    assert listed["total"] == 2
    assert [(s["name"], s["type"], s["status"]) for s in listed["sources"]] == [
        ("archive-scan", "manual", "stopped"), ("photos-watch", "live", "running")]
    got = await call(client, "source-get", {"name": "photos-watch"})
    assert got == {**got, "path": str(tree / "Photos"), "debounce_ms": 500, "watch_recursive": True}
    assert got["watcher"]["running"] is True


async def test_stop_and_start_a_live_source(client, app, tree):
    await call(client, "source-create", live_example(tree))
    stopped = await call(client, "source-stop", {"name": "photos-watch"})
    assert stopped == {**stopped, "name": "photos-watch", "status": "stopped", "stopped": True}
    assert (await call(client, "source-stop", {"name": "photos-watch"}))["stopped"] is False
    assert (await call(client, "source-get", {"name": "photos-watch"}))["status"] == "stopped"
    (tree / "Photos" / "while-stopped.jpg").write_bytes(b"j")
    started = await call(client, "source-start", {"name": "photos-watch"})
    assert started == {**started, "status": "running", "started": True, "job_id": None}
    again = await call(client, "source-start", {"name": "photos-watch"})
    assert again["started"] is False and "already" in again["message"]
    await poll(lambda: anyio.to_thread.run_sync(
        lambda: get_entry(app.engine, path=str(tree / "Photos" / "while-stopped.jpg"))), bool, "the catch-up")


async def test_a_disabled_live_source_waits_for_source_start(client, tree):
    created = await call(client, "source-create", {**live_example(tree), "enabled": False})
    assert created["status"] == "stopped" and created["watcher"] is None


async def test_enabled_live_sources_start_with_the_server(client, app, tree):
    await call(client, "source-create", live_example(tree))
    await call(client, "source-create", {**live_example(tree), "name": "off", "enabled": False})
    await call(client, "source-create", manual_example(tree))
    app.sources.shutdown()
    assert (await call(client, "source-get", {"name": "photos-watch"}))["status"] == "stopped"
    assert app.sources.start_enabled() == 1
    statuses = {s["name"]: s["status"] for s in (await call(client, "source-list"))["sources"]}
    assert statuses == {"archive-scan": "stopped", "off": "stopped", "photos-watch": "running"}


async def test_stop_cancels_a_running_manual_index(client, app, tree):
    await call(client, "source-create", manual_example(tree))
    await call(client, "source-start", {"name": "archive-scan"})
    stopped = await call(client, "source-stop", {"name": "archive-scan"})
    assert stopped["status"] == "stopped"
    final = await anyio.to_thread.run_sync(lambda: app.sources.wait("archive-scan", timeout=TIMEOUT))
    assert final["status"] in ("stopped", "error") and final["job_id"] is None


async def test_delete_stops_the_source_and_keeps_its_entries(client, app, tree):
    await call(client, "source-create", live_example(tree))
    await poll(lambda: call(client, "source-stats", {"name": "photos-watch"}), lambda s: s["total_scans"] == 1,
               "the catch-up scan")
    deleted = await call(client, "source-delete", {"name": "photos-watch"})
    assert deleted == {"name": "photos-watch", "type": "live", "path": str(tree / "Photos"), "deleted": True}
    assert get_entry(app.engine, path=str(tree / "Photos" / "photo.jpg")) is not None
    with pytest.raises(ToolFailed, match="source 'photos-watch' not found; there are no sources yet"):
        await call(client, "source-get", {"name": "photos-watch"})


@pytest.mark.parametrize("args, message", [
    ({"type": "filesystem.watch"}, "parameter 'type': input should be 'live' or 'manual'"),
    ({"path": "/etc"}, "outside the allowed roots"),
    ({"path": "Photos"}, "is relative"),
    ({"path": "MISSING"}, "does not exist"),
    ({"name": "has space"}, "not a valid source name"),
    ({"debounce_ms": -1}, "debounce_ms"),
    ({"recursive": True}, "unknown parameter(s) 'recursive'"),
])
async def test_create_rejects_bad_input_naming_it(client, tree, args, message):
    if args.get("path") == "MISSING":
        args = {"path": str(tree / "missing")}
    with pytest.raises(ToolFailed) as err:
        await call(client, "source-create", {**live_example(tree), **args})
    assert message in str(err.value)


async def test_create_refuses_a_duplicate_name(client, tree):
    await call(client, "source-create", manual_example(tree))
    with pytest.raises(ToolFailed, match="ALREADY_EXISTS: source 'archive-scan' already exists"):
        await call(client, "source-create", manual_example(tree))


@pytest.mark.parametrize("tool", ["source-start", "source-stop", "source-get", "source-delete", "source-stats"])
async def test_unknown_names_are_tool_errors_listing_the_sources(client, tree, tool):
    await call(client, "source-create", manual_example(tree))
    result = await client.call_tool(tool, {"name": "ghost"})
    assert result.is_error
    assert "NOT_FOUND: source 'ghost' not found; existing sources: archive-scan" in result.content[0].text
    assert json.loads(result.content[1].text)["error"]["data"]["field"] == "name"


async def test_tools_follow_the_reference_parameters_and_carry_annotations(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    create = tools["source-create"].input_schema
    assert set(create["required"]) == {"name", "type", "path"}
    defaults = {k: v.get("default") for k, v in create["properties"].items()}
    assert defaults == {"name": None, "type": None, "path": None, "enabled": True, "watch_recursive": True,
                        "debounce_ms": 500}
    for name in ("source-start", "source-stop", "source-get", "source-delete", "source-stats"):
        assert list(tools[name].input_schema["properties"]) == ["name"]
    assert tools["source-list"].input_schema.get("properties", {}) == {}
    assert tools["source-list"].annotations.read_only_hint is True
    assert tools["source-stats"].annotations.read_only_hint is True
    assert tools["source-delete"].annotations.destructive_hint is True


async def test_source_get_and_source_stats_report_the_same_figures(client, app, tree):
    await call(client, "source-create", live_example(tree))
    await poll(lambda: call(client, "source-get", {"name": "photos-watch"}), lambda s: s["total_scans"] == 1,
               "the catch-up scan")
    (tree / "Photos" / "more.txt").write_text("more")  # the watcher adds it: the count moves after the scan
    await poll(lambda: call(client, "source-stats", {"name": "photos-watch"}), lambda s: s["entries_indexed"] == 7,
               "the watcher to index more.txt")
    got = await call(client, "source-get", {"name": "photos-watch"})
    stats = await call(client, "source-stats", {"name": "photos-watch"})
    assert {k: got[k] for k in stats} == stats


async def test_a_live_source_on_an_unreadable_folder_reports_it_in_its_status(tmp_path, tree):
    """The server runs as root without its read capabilities, so chmod 000 really denies it."""
    import sys
    from pathlib import Path

    from mcp import Client, StdioServerParameters

    from tests.e2e.conftest import server_env
    from tests.flows.index.checks import WITHOUT_READ_CAPS, unreadable_for_children

    if not unreadable_for_children(tmp_path):
        pytest.skip("setpriv cannot drop the read capabilities here")
    repo = Path(__file__).resolve().parents[2]
    (tree / "Videos").chmod(0)
    params = StdioServerParameters(
        command=WITHOUT_READ_CAPS[0],
        args=[*WITHOUT_READ_CAPS[1:], sys.executable, "-m", "mcp_server.cli", "serve", "--root", str(tree),
              "--no-prefect"],
        env=server_env(tmp_path, prefect=False), cwd=str(repo))
    try:
        async with Client(params) as server:
            await call(server, "source-create", {"name": "videos", "type": "live", "path": str(tree / "Videos")})
            videos = await poll(lambda: call(server, "source-get", {"name": "videos"}),
                                lambda s: s["status"] == "error", "the videos source to report its error")
            assert videos["last_error"].startswith(f"cannot read {tree / 'Videos'}: Permission denied")
            stats = await call(server, "source-stats", {"name": "videos"})
            assert stats["status"] == "error" and stats["last_error"] == videos["last_error"]

            await call(server, "source-create", {"name": "home", "type": "live", "path": str(tree)})
            home = await poll(lambda: call(server, "source-get", {"name": "home"}),
                              lambda s: s["total_scans"] == 1, "the home source's catch-up")
            assert home["status"] == "running"
            assert home["last_error"] == f"could not read 1 folder(s): {tree / 'Videos'} (Permission denied)"
            page = await call(server, "navigate", {"path": str(tree / "Videos")})
            assert page["complete"] is False and page["scanError"] == "unreadable: Permission denied"

            await call(server, "source-create", {"name": "by-hand", "type": "manual", "path": str(tree / "Videos")})
            await call(server, "source-start", {"name": "by-hand"})
            manual = await poll(lambda: call(server, "source-get", {"name": "by-hand"}),
                                lambda s: s["status"] != "running", "the manual source's index job")
            assert manual["status"] == "error"
            assert manual["last_error"] == f"cannot read {tree / 'Videos'}: Permission denied"
    finally:
        (tree / "Videos").chmod(0o755)
