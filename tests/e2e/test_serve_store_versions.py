"""`assay serve` and the store's schema revision, as an operator meets them (issue 25, section 1): started on a store
of the release before migrations it upgrades it before it serves, a copy of the store as it was kept beside it and
named in its log; started on a store a newer assay upgraded it refuses to serve, says why and what to do, and leaves
the store as it was."""

from __future__ import annotations

import hashlib
import re
import shutil
import sqlite3
import subprocess
from pathlib import Path

import pytest
from mcp import Client

from store import migrate
from tests.e2e.conftest import REPO, _call, _stop, free_port, serve_args, server_env, wait_listening
from tests.store.test_migrations_release import ROWS, sqlite_release_store

pytestmark = pytest.mark.e2e

FIXTURES = Path(__file__).parents[1] / "store" / "fixtures"


async def test_serve_upgrades_an_older_store_at_start_after_a_copy_named_in_its_log(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    data = tmp_path / "data"  # server_env's data dir
    data.mkdir()
    sqlite_release_store(data)
    port, log = free_port(), tmp_path / "serve.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(serve_args(root, prefect=False, extra=["--transport", "http", "--port", str(port)]),
                                stdout=out, stderr=subprocess.STDOUT, env=server_env(tmp_path, prefect=False),
                                cwd=REPO, start_new_session=True)
    try:
        wait_listening(proc, port, log)
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            report = await _call(client, "db-diagnose", {})
    finally:
        _stop(proc)
    said = log.read_text()
    (copy,) = data.glob("assay.db.before-unversioned-*.bak")
    warning = re.search(r"WARNING store\.migrate: store (\S+) is at schema revision \(none: made before migrations\), "
                        rf"this assay's is {migrate.head()}: upgrading it; a copy of it as it was is at (\S+)", said)
    assert warning is not None, said
    assert warning.groups() == (str(data / "assay.db"), str(copy))
    assert said.index("store.migrate") < said.index("assay serving over http")  # before it serves
    assert report["schema_check"] == "ok" and report["integrity_check"] == "ok", report
    assert report["entry_count"] == ROWS["entries"]
    with sqlite3.connect(copy) as old, sqlite3.connect(data / "assay.db") as new:
        assert old.execute("SELECT count(*) FROM entries").fetchone() == (ROWS["entries"],)
        assert not old.execute("SELECT 1 FROM sqlite_master WHERE name = 'alembic_version'").fetchall()
        assert new.execute("SELECT version_num FROM alembic_version").fetchall() == [(migrate.head(),)]


def test_serve_refuses_a_store_of_a_newer_assay_saying_what_to_do_and_leaves_it_alone(tmp_path):
    root = tmp_path / "home"
    root.mkdir()
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(FIXTURES / "store-9cbe7cf.db", data / "assay.db")
    with sqlite3.connect(data / "assay.db") as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('0999_from_the_future')")
    before = dump(data / "assay.db")
    done = subprocess.run(serve_args(root, prefect=False, extra=["--transport", "http", "--port", str(free_port())]),
                          env=server_env(tmp_path, prefect=False), cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    said = done.stderr.strip().splitlines()[-1]
    assert said.startswith("assay: STORE_VERSION: the store at ") and "0999_from_the_future" in said, said
    assert migrate.head() in said and "assay db restore" in said and "The store was not changed." in said, said
    assert "Traceback" not in done.stderr and "serving" not in done.stderr
    assert dump(data / "assay.db") == before  # (opening it may have set its journal mode: no row or table)
    assert not [p.name for p in data.iterdir() if p.name.startswith("assay.db.") or p.suffix == ".bak"]


def dump(db: Path) -> str:
    """The SQL text of everything the store holds."""
    with sqlite3.connect(db) as conn:
        return hashlib.sha256("\n".join(conn.iterdump()).encode()).hexdigest()
