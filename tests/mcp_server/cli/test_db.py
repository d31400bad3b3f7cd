"""`assay db upgrade | current | history`: a store made before migrations upgraded by hand (as a separate process,
the way an operator runs it: from -> to on stdout, the copy taken named on stderr), its revision shown before and
after, the revisions listed; a store a newer assay upgraded named as such and refused, untouched."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from mcp_server.cli import main
from store import migrate
from tests.mcp_server.test_cli import assay

FIXTURE = Path(__file__).parents[2] / "store" / "fixtures" / "store-9cbe7cf.db"


def db(capsys, tmp_path: Path, *args: str) -> tuple[int, str, str]:
    """`assay db ARGS` run in this process on the store in tmp_path/data: (exit status, stdout, stderr)."""
    code = main(["db", *args, "--data-dir", str(tmp_path / "data")])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_store_made_before_migrations_is_upgraded_by_hand(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    shutil.copy(FIXTURE, tmp_path / "data" / "assay.db")
    code, out, _ = db(capsys, tmp_path, "current")
    assert code == 1 and out.startswith("(none): no revision recorded")

    res = assay(tmp_path, "db", "upgrade")
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"(none) -> {migrate.head()}\n"
    (copy,) = (tmp_path / "data").glob("assay.db.before-unversioned-*.bak")
    assert f"the store as it was: {copy}" in res.stderr

    code, out, _ = db(capsys, tmp_path, "current")
    assert (code, out) == (0, f"{migrate.head()} (head)\n")
    code, out, _ = db(capsys, tmp_path, "upgrade")
    assert (code, out) == (0, f"{migrate.head()}: already there, nothing to do\n")
    code, out, _ = db(capsys, tmp_path, "history")
    assert code == 0 and out.splitlines()[0].startswith(f"{migrate.head()} (head)  ")
    assert out.splitlines()[-1].startswith("0001_baseline")


def test_a_store_of_a_newer_assay_is_named_and_not_upgraded(tmp_path, capsys):
    (tmp_path / "data").mkdir()
    shutil.copy(FIXTURE, tmp_path / "data" / "assay.db")
    with sqlite3.connect(tmp_path / "data" / "assay.db") as conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('0999_from_the_future')")
    code, out, _ = db(capsys, tmp_path, "current")
    assert code == 1 and out.startswith("0999_from_the_future (unknown to this assay")
    code, _, err = db(capsys, tmp_path, "upgrade")
    assert code == 2 and "STORE_VERSION" in err and "0999_from_the_future" in err
    with sqlite3.connect(tmp_path / "data" / "assay.db") as conn:  # untouched: still without its runs
        assert conn.execute("SELECT count(*) FROM jobs WHERE kind = 'plan'").fetchone() == (0,)
    assert not list((tmp_path / "data").glob("*.bak"))


def test_a_data_dir_without_a_store_is_said_so_and_left_without_one(tmp_path, capsys):
    for action, verb in (("current", "read"), ("upgrade", "upgrade")):
        code, out, err = db(capsys, tmp_path, action)
        assert (code, out) == (1, "")
        assert err.startswith(f"assay: there is no store at {tmp_path / 'data' / 'assay.db'}: nothing to {verb} ")
    assert not (tmp_path / "data" / "assay.db").exists()
