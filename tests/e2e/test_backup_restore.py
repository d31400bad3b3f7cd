"""Backup and restore end to end: a real `assay serve` (Streamable HTTP, the real embedding model) runs a plan that
extracts text and embeds it; `assay db backup` copies the store while a run of that plan is writing; later work
(a file about zeppelins, extracted and embedded) makes the live store and its indexes move on; the server is
stopped, `assay db restore` puts the backup back, and the server started again answers text search, semantic
search and citations from the restored store: its text and vector indexes rebuilt, nothing of the later work left.

One server data dir for the module, started twice; a small generated library (three topics, a two-page PDF, and a
bulk of notes so the second run lasts long enough to be copied mid-way)."""

from __future__ import annotations

import argparse
import contextlib
import io
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pymupdf
import pytest
from mcp import Client

from mcp_server.cli import db_backup
from mcp_server.cli.commands import COMMANDS
from mcp_server.cli.common import common_options
from tests.e2e.conftest import REPO, _call, _stop, free_port, serve_args, server_env, wait_listening

pytestmark = pytest.mark.e2e

TOPICS = {
    "topics/planets.txt": "The planets of the solar system orbit the Sun. Saturn is famous for its rings of ice; "
                          "astronomers watch them with telescopes at night.\n",
    "topics/bread.md": "# Baking bread\n\nKnead the dough of flour, water, salt and yeast, let it rise until doubled, "
                       "and bake the loaf in a hot oven until the crust is golden brown.\n",
}
PDF_PAGES = ["Gardening. Plant tomatoes in sunny beds with rich compost and water the vegetables at dawn.",
             "Car maintenance. Change the engine oil every ten thousand kilometres and check the tyre pressure."]
BULK = 30  # notes the second run extracts and embeds: seconds of work, during which the backup is taken
LATER = "later/airships.md"
LATER_TEXT = "# Airships\n\nA zeppelin is a rigid airship filled with hydrogen or helium, steered by its fins.\n"
PLAN = """plan library
source books index {root}
rule text when media_type in [document, text]
  do extract_text
rule vectors when media_type in [document, text]
  do embed shelf chunk_size=300 overlap=30
"""


def make_topics(root: Path) -> None:
    for rel, body in TOPICS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(body)
    doc = pymupdf.open()
    for body in PDF_PAGES:
        doc.new_page().insert_textbox(pymupdf.Rect(72, 72, 540, 700), body, fontsize=11)
    doc.save(root / "topics" / "handbook.pdf")


def make_bulk(root: Path) -> None:
    (root / "bulk").mkdir(parents=True)
    for n in range(BULK):
        (root / "bulk" / f"note{n:02}.md").write_text(
            f"# Note {n}\n\n" + "".join(f"Filler paragraph {k} of note {n}, about the weather of day {k}: mild "
                                        f"rain in the morning, sun in the afternoon, wind from the west.\n\n"
                                        for k in range(6)))


class Served:
    """`assay serve --transport http` on one data dir, started and stopped as the test needs."""

    def __init__(self, base: Path, root: Path) -> None:
        self.base, self.root, self.data = base, root, base / "data"
        self.proc: subprocess.Popen | None = None
        self.url, self.starts = "", 0

    def start(self) -> None:
        port = free_port()
        self.starts += 1
        self.log = self.base / f"http-{self.starts}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                serve_args(self.root, prefect=False, extra=["--transport", "http", "--port", str(port)]),
                stdout=out, stderr=subprocess.STDOUT, env=server_env(self.base, prefect=False), cwd=REPO,
                start_new_session=True)
        wait_listening(self.proc, port, self.log)
        self.url = f"http://127.0.0.1:{port}/mcp"

    def stop(self) -> None:
        if self.proc is not None:
            _stop(self.proc)
            self.proc = None

    def db(self, *words: str, here: bool = False) -> tuple[int, str]:
        """`assay db WORDS` on this data dir: its exit status and stdout. ``here``, or until the `db` command is in
        the command table: its backup and restore actions through their own parser, in this process (the backup
        taken mid-run starts at once, not after a second of imports)."""
        common = ["--data-dir", str(self.data), "--root", str(self.root)]
        if "db" in COMMANDS and not here:
            done = subprocess.run([sys.executable, "-m", "mcp_server.cli", "db", *words, *common], cwd=REPO,
                                  env=server_env(self.base, prefect=False), capture_output=True, text=True)
            assert not done.stderr.strip() or done.returncode == 0, done.stderr
            return done.returncode, done.stdout
        parser = argparse.ArgumentParser(prog="assay db")
        db_backup.add_parsers(parser.add_subparsers(dest="db_action"), common_options)
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = db_backup.run(parser.parse_args([*words, *common]))
        assert code is not None
        return code, printed.getvalue()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    base = tmp_path_factory.mktemp("backup-e2e")
    root = base / "library"
    make_topics(root)
    server = Served(base, root)
    server.start()
    try:
        yield server
    finally:
        server.stop()


async def wait_done(client, plan: str, execution_id: int) -> dict:
    with anyio.fail_after(180):
        while True:
            executions = (await _call(client, "plan-get", {"name": plan}))["executions"]
            row = next(e for e in executions if e["execution_id"] == execution_id)
            if row["status"] != "running":
                return row
            await anyio.sleep(0.2)


async def text_matches(client, needle: str, *, unextracted: int = 0) -> list[str]:
    """The documents with a line holding ``needle``, once the text index has caught up (what is pending then is
    the ``unextracted`` documents: indexed files whose text was not extracted yet)."""
    with anyio.fail_after(60):
        while True:  # a search indexes a few queued documents itself; the rest are the background thread's
            found = await _call(client, "search_documents", {"query": needle, "scope": {"type": "global"},
                                                               "max_results": 500})
            if found["pending_documents"] == unextracted:
                return sorted({m["document"] for m in found["matches"]})
            await anyio.sleep(0.2)


async def semantic_files(client, question: str) -> list[str]:
    found = await _call(client, "search", {"query": question, "collection": "shelf", "mode": "semantic",
                                           "min_score": 0, "limit": 50})
    return [h["file"] for h in found["hits"]]


def in_backup(path: Path, sql: str) -> list[tuple]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return conn.execute(sql).fetchall()
    finally:
        conn.close()


async def test_backup_during_a_plan_run_then_restore_answers_search_and_cite_from_the_restored_store(served):
    root = served.root
    async with Client(served.url) as client:
        with anyio.fail_after(300):
            await _call(client, "plan-create", {"text": PLAN.format(root=root)})
            first = await _call(client, "plan-execute", {"name": "library", "wait": True})
            assert first["status"] == "success", first

            # the second run extracts and embeds the bulk of notes; the backup is taken while it writes
            make_bulk(root)
            running = await _call(client, "plan-execute", {"name": "library"})
            assert running["status"] == "running"
            while not (await _call(client, "search_documents", {"query": "paragraph 0 of note",
                                                                "scope": {"type": "global"}}))["matches"]:
                await anyio.sleep(0.1)  # some of the notes extracted: the copy holds part of the run's work
            code, printed = served.db("backup", str(served.base / "backups") + "/", here=True)
            assert code == 0 and "backed up the sqlite store to" in printed, printed
            copy = next((served.base / "backups").iterdir())
            assert printed.split(" to ", 1)[1].startswith(f"{copy}: ")
            assert in_backup(copy, "PRAGMA integrity_check") == [("ok",)]
            assert in_backup(copy, f"SELECT status FROM plan_executions WHERE id = {running['execution_id']}") \
                == [("running",)]  # copied mid-run: the snapshot of a store being written
            saved_bulk = {p.rsplit("/", 1)[1] for (p,) in in_backup(
                copy, "SELECT e.path FROM documents d JOIN entries e ON e.id = d.entry_id "
                      "WHERE e.path LIKE '%/bulk/%' AND d.status = 'ok'")}
            # the run's files indexed but not extracted yet when copied: pending in the restored store
            unextracted = in_backup(copy, "SELECT count(*) FROM entries WHERE path LIKE '%/bulk/%' AND kind = 'file'"
                                    )[0][0] - len(saved_bulk)
            assert saved_bulk and (await wait_done(client, "library", running["execution_id"]))["status"] == "success"

            # later work: the live store and its indexes move past the backup
            (root / LATER).parent.mkdir()
            (root / LATER).write_text(LATER_TEXT)
            assert (await _call(client, "plan-execute", {"name": "library", "wait": True}))["status"] == "success"
            assert await text_matches(client, "zeppelin") == [LATER]
            assert (await semantic_files(client, "a rigid airship filled with helium"))[0] == LATER
            assert len(await text_matches(client, "paragraph 0 of note")) == BULK

    served.stop()
    code, printed = served.db("restore", str(copy))
    assert code == 0 and "the text and vector indexes will be rebuilt" in printed, printed
    assert "assay.db.replaced-" in printed
    served.start()

    async with Client(served.url) as client:
        with anyio.fail_after(300):
            # text: what the backup held, nothing written after it (the old index files would still find zeppelin)
            assert await text_matches(client, "zeppelin", unextracted=unextracted) == []
            assert await text_matches(client, "telescopes", unextracted=unextracted) == ["topics/planets.txt"]
            assert {d.rsplit("/", 1)[1] for d in await text_matches(client, "paragraph 0 of note",
                                                                      unextracted=unextracted)} == saved_bulk
            # semantic: the vectors of the restored store only, ranked as before
            files = await semantic_files(client, "Which planet has rings?")
            assert files[0] == "topics/planets.txt" and LATER not in files
            hits = (await _call(client, "search", {"query": "when should I change the engine oil?",
                                                   "collection": "shelf", "mode": "semantic", "limit": 3}))["hits"]
            assert hits[0]["file"] == "topics/handbook.pdf", hits
            # cite: the hit's address resolves into the page that says it
            cited = await _call(client, "resolve", {"address": hits[0]["citation"]})
            with pymupdf.open(cited["output_path"]) as doc:
                assert "engine oil" in "".join(page.get_text() for page in doc)
    assert "rebuilt from the store" in served.log.read_text()  # the vector index, from the restored vectors
