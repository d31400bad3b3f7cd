"""A full disk and unreadable files end to end: a real `assay serve` (HTTP, plain runs) whose data dir (the SQLite
store, the artifact cache, the text index) is a small tmpfs the test fills up with a filler file, and frees again by
deleting it.

For each of indexing, thumbnailing (the classifier) and text extraction: the disk fills mid-run; the caller gets a
clear NO_SPACE (the sync tool's error and the job's row for an index; the plan run's error for the outcomes: a full
disk stops the run rather than recording an error for every file after it); db-diagnose finds the store sound and
the cache without orphans or half-written files; once space is freed the same work completes, and what the stopped
run committed is not done again. Then files that vanish or change kind between the index and the read (unlinked, a
dangling symlink, a directory, a FIFO with no writer) are each that file's error, with its code and path, while the
rest of the run is done.

One server and one generated tree for the module; ~30 s.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
from pathlib import Path
from typing import Any, Iterator

import anyio
import pytest
from mcp import Client
from mcp_types import CallToolResult, TextContent

from examples import mediagen as media
from tests.e2e.conftest import REPO, _call, _stop, free_port, serve_args, server_env, wait_listening
from tests.small_disk import SmallDisk, small_disk

pytestmark = [pytest.mark.e2e, pytest.mark.skipif(not media.HAVE_FFMPEG, reason="needs ffmpeg")]

MANY = 6000  # files of the index scenario: three of the walk's 2000-entry batches
PHOTOS = 40  # 1600x1200, kept at that size by the plan: ~80 KB a thumbnail, 3.3 MB in all
DOCS = 60
LINES = 800  # 3 MB of text in all, ~1.2 MB of the store's WAL for each write of 16 documents
DISK_KIB = 48 * 1024
DOCS_SCOPE = {"type": "collection", "path": "docs"}


def make_tree(root: Path) -> Path:
    for i in range(MANY):
        path = root / "many" / f"folder-{i // 100:03d}" / f"a-file-with-a-rather-long-name-{i:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x")
    for i in range(PHOTOS):
        media.jpeg(root / "photos" / f"p{i:02d}.jpg", (1600, 1200), seed=i)
    for i in range(DOCS):
        lines = [f"document{i} line {n} {os.urandom(24).hex()}" for n in range(LINES)]
        (root / "docs" / f"doc{i:02d}.md").parent.mkdir(parents=True, exist_ok=True)
        (root / "docs" / f"doc{i:02d}.md").write_text("\n".join(lines) + "\n")
    for name in ("good", "gone", "link", "folder", "pipe"):
        media.jpeg(root / "flaky" / f"{name}.jpg", (320, 240), seed=100 + len(name))
        (root / "flaky" / f"{name}.md").write_text(f"the {name} notes\nwith a second line\n")
    return root


class Server:
    def __init__(self, url: str, tree: Path, disk: SmallDisk) -> None:
        self.url, self.tree, self.disk = url, tree, disk
        self.data = disk.path

    def store(self) -> sqlite3.Connection:
        """The server's store, read-only from this process (what the tools do not show: rows' scan ids, keys)."""
        return sqlite3.connect(f"file:{self.data / 'assay.db'}?mode=ro", uri=True, timeout=30)

    def rows(self, sql: str, *args: Any) -> list[tuple]:
        with self.store() as conn:
            return conn.execute(sql, args).fetchall()

    def fill(self, leave: int) -> None:
        """Leave about ``leave`` bytes free on the data dir's disk, the store's WAL emptied first: what the store
        writes next must take new space (an earlier test's WAL, reused, would take several MB without any)."""
        with sqlite3.connect(self.data / "assay.db", timeout=30) as conn:
            busy, _, _ = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        assert busy == 0, "the server held the store while the test emptied its WAL"
        self.disk.fill(leave)


@pytest.fixture(scope="module")
def server(tmp_path_factory) -> Iterator[Server]:
    base = tmp_path_factory.mktemp("out-of-disk")
    tree = make_tree(base / "home")
    with small_disk(base / "data", DISK_KIB) as disk:  # server_env puts the data dir at <base>/data
        port = free_port()
        log = base / "server.log"
        with open(log, "wb") as out:
            proc = subprocess.Popen(serve_args(tree, prefect=False, extra=["--transport", "http", "--port", str(port)]),
                                    stdout=out, stderr=subprocess.STDOUT, env=server_env(base, prefect=False),
                                    cwd=REPO, start_new_session=True)
        try:
            wait_listening(proc, port, log)
            yield Server(f"http://127.0.0.1:{port}/mcp", tree, disk)
        finally:
            _stop(proc)


@pytest.fixture
def full(server: Server) -> Iterator[SmallDisk]:
    """The data dir's disk, given back whole after the test (what a test fills, it leaves free again)."""
    yield server.disk
    server.disk.unfill()


def text_of(result: CallToolResult) -> str:
    first = result.content[0]
    assert isinstance(first, TextContent), first
    return first.text


async def error_text(client: Client, tool: str, args: dict) -> str:
    result = await client.call_tool(tool, args)
    assert result.is_error, f"{tool} did not fail: {result.structured_content}"
    return text_of(result)


async def healthy(client: Client) -> dict:
    report = await _call(client, "db-diagnose", {})
    assert report["integrity_check"] == "ok" and report["healthy"], report["warnings"]
    cache = report["artifact_cache"]
    assert cache["orphan_files"] == 0 and cache["missing_files"] == 0, cache
    return report


def no_temporary_files(data: Path) -> None:
    left = [p for p in (data / "cache").rglob(".tmp-*")] if (data / "cache").exists() else []
    assert left == [], left


# entries a scan wrote whole (a folder it had not finished is written too, marked incomplete, and finished later)
FINISHED_BY = "SELECT count(*) FROM entries WHERE scan_id = ? AND scan_error IS NULL"


async def test_an_index_that_fills_the_disk_is_no_space_and_the_next_one_completes_without_redoing(server, full):
    root = str(server.tree / "many")
    server.fill(1800 * 1024)  # room for the first batch of the walk (~1.2 MB of WAL), not for all three
    async with Client(server.url) as client:
        with anyio.fail_after(120):
            said = await error_text(client, "index", {"root": root, "async": False, "maxAge": 0})
            assert said.startswith("NO_SPACE: index job ") and "is full" in said, said
            first = int(said.removeprefix("NO_SPACE: index job ").split()[0])
            job = await _call(client, "job-progress", {"jobId": first})
            assert job["status"] == "failed" and job["error"].startswith("NO_SPACE: "), job
            await healthy(client)
            committed = server.rows(FINISHED_BY, first)[0][0]
            assert 0 < committed < MANY  # some batches were written before the disk was full

            full.unfill()
            done = await _call(client, "index", {"root": root, "async": False, "maxAge": 0})
            assert done["status"] == "completed" and done["files"] == MANY, done
            await healthy(client)
    # the rows the stopped scan finished were not written again: they still carry its id (the folders it marked
    # incomplete were finished by the second)
    assert server.rows(FINISHED_BY, first)[0][0] == committed
    assert server.rows("SELECT count(*) FROM entries WHERE scan_error IS NOT NULL") == [(0,)]


async def run_into_a_full_disk(client: Client, server: Server, plan: str) -> None:
    """Execute ``plan`` (waiting) on a disk that fills up: the execution ends in error saying the disk is full, or,
    when the store had no room left even for that row, the call itself is NO_SPACE (the runner closes the rows once
    it can); either way nothing is left running."""
    result = await client.call_tool("plan-execute", {"name": plan, "wait": True})
    if result.is_error:
        assert text_of(result).startswith("NO_SPACE: plan job "), text_of(result)
    else:
        row = result.structured_content
        assert row["status"] == "error" and "is full" in row["error_message"], row
    last = server.rows("SELECT status, error_message FROM plan_executions WHERE plan_name = ? ORDER BY id DESC "
                       "LIMIT 1", plan)
    assert last[0][0] == "error" and "is full" in last[0][1], last


def plan_text(name: str, folder: Path, rule: str) -> str:
    return f'plan {name}\nsource files index "{folder}"\nrule {rule}\n'


async def test_thumbnailing_that_fills_the_disk_stops_the_run_with_no_space_and_resumes(server, full):
    photos = server.tree / "photos"
    async with Client(server.url) as client:
        with anyio.fail_after(180):
            rule = "all when extension = .jpg\n  do classifier all maxWidth=1600 maxHeight=1200 quality=95"
            await _call(client, "plan-create", {"text": plan_text("thumbs", photos, rule), "format": "dsl"})
            await _call(client, "index", {"root": str(photos), "async": False, "maxAge": 0})
            server.fill(2200 * 1024)  # room for the run's first rows and its first write of 16 files, not for all
            await run_into_a_full_disk(client, server, "thumbs")
            done = server.rows("SELECT count(DISTINCT entry_id) FROM artifacts WHERE type = 'thumbnail'")[0][0]
            errors = server.rows("SELECT count(*) FROM outcome_records WHERE status = 'error'")[0][0]
            assert 0 < done < PHOTOS and errors == 0  # no file was blamed for the full disk
            await healthy(client)  # no orphan in the cache, no artifact without its file
            no_temporary_files(server.data)

            full.unfill()
            resumed = await _call(client, "plan-execute", {"name": "thumbs", "wait": True})
            assert resumed["status"] == "success", resumed
            outcome = resumed["summary"]["rules"]["all"]["outcomes"][0]
            assert outcome["skipped_unchanged_entries"] == done and outcome["applied"] == PHOTOS - done, outcome
            await healthy(client)


async def test_text_extraction_that_fills_the_disk_stops_with_no_space_and_resumes(server, full):
    docs = server.tree / "docs"
    async with Client(server.url) as client:
        with anyio.fail_after(180):
            await _call(client, "plan-create", {"text": plan_text("texts", docs, "text when extension = .md\n"
                                                                  "  do extract_text"), "format": "dsl"})
            await _call(client, "index", {"root": str(docs), "async": False, "maxAge": 0})
            server.fill(2048 * 1024)  # room for the run's first rows and the first write of 16 documents
            await run_into_a_full_disk(client, server, "texts")
            done = server.rows("SELECT count(*) FROM documents WHERE status = 'ok'")[0][0]
            assert 0 < done < DOCS
            search = await client.call_tool("search_documents", {"query": "document1", "scope": DOCS_SCOPE})
            # the text index catching up on the documents written has no room for its segment: the search says
            # NO_SPACE, not a crash (when its thread indexed them before the disk was full, it answers)
            assert not search.is_error or text_of(search).startswith("NO_SPACE: "), text_of(search)
            await healthy(client)

            full.unfill()
            resumed = await _call(client, "plan-execute", {"name": "texts", "wait": True})
            assert resumed["status"] == "success", resumed
            outcome = resumed["summary"]["rules"]["text"]["outcomes"][0]
            assert outcome["skipped_unchanged_entries"] == done and outcome["applied"] == DOCS - done, outcome
            while True:  # a search indexes a few documents itself, the text index's thread the rest
                found = await _call(client, "search_documents", {"query": f"document{DOCS - 1}", "scope": DOCS_SCOPE})
                if found["pending_documents"] == 0:
                    break
                await anyio.sleep(0.2)
            assert found["total_matches"] == LINES, found
            await healthy(client)


async def test_files_that_vanish_or_change_kind_after_the_index_are_each_their_own_error(server):
    flaky = server.tree / "flaky"
    async with Client(server.url) as client:
        with anyio.fail_after(120):
            # the notes are picked into a set while they are all there; the plan that extracts them reads the set,
            # so no scan of its own sees the changes first: the extraction meets them, as a run in progress would
            await _call(client, "plan-create", {"text": plan_text("flaky-pick", flaky, "notes when extension = .md\n"
                                                                  "  do selection_set flaky-notes"), "format": "dsl"})
            await _call(client, "plan-execute", {"name": "flaky-pick", "wait": True})
            await _call(client, "plan-create", {"text": "plan flaky\nsource notes set flaky-notes\n"
                                                        "rule text when extension = .md\n  do extract_text\n",
                                                "format": "dsl"})
            for ext in (".jpg", ".md"):  # between the index and the read
                (flaky / f"gone{ext}").unlink()
                (flaky / f"link{ext}").unlink()
                (flaky / f"link{ext}").symlink_to(flaky / f"nowhere{ext}")
                (flaky / f"folder{ext}").unlink()
                (flaky / f"folder{ext}").mkdir()
                (flaky / f"pipe{ext}").unlink()
                os.mkfifo(flaky / f"pipe{ext}")

            job = await _call(client, "rerun-classifier", {"sourcePath": str(flaky), "operations": ["thumbnail"],
                                                           "async": False})
            assert job["status"] == "completed" and job["files"] == 10 and job["errors"] == 8, str(job)
            issues = {Path(i["path"]).name: i["reason"] for i in job["issues"]}  # the notes are classified too
            codes = {"gone": "FILE_NOT_FOUND", "link": "FILE_NOT_FOUND", "folder": "NOT_A_FILE", "pipe": "NOT_A_FILE"}
            expected = {f"{name}{ext}": f"thumbnail: {code}: " for name, code in codes.items()
                        for ext in (".jpg", ".md")}
            assert set(issues) == set(expected), issues  # good.jpg and good.md were done
            assert all(issues[name].startswith(start) for name, start in expected.items()), issues

            run = await _call(client, "plan-execute", {"name": "flaky", "wait": True})
            assert run["status"] == "partial", run
            outcome = run["summary"]["rules"]["text"]["outcomes"][0]
            assert outcome["applied"] == 1 and outcome["errors"] == 4, outcome
            failed = dict(server.rows("SELECT e.name, d.error_code || ': ' || d.error FROM documents d "
                                      "JOIN entries e ON e.id = d.entry_id WHERE d.status = 'error'"))
            assert failed.keys() == {"gone.md", "link.md", "folder.md", "pipe.md"}, failed
            assert all(reason.startswith("FILTER_FAILED: ") for reason in failed.values()), failed
