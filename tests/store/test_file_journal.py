"""The journal of file operations (store.file_journal) on SQLite and PostgreSQL: an operation written down before the
disk changes, settled done or failed, listed while in flight; batches of intents in one transaction; the history
by path, execution and call, newest first, narrowed for a user limited to some roots; undo marks; and the items an
older assay's move runs had in flight becoming journal rows at the upgrade (revision 0002)."""

from __future__ import annotations

import json

import pytest
from sqlalchemy import delete, insert, select

from store import file_journal as fj
from store import migrate
from store import visibility
from store.engine import make_engine
from store.errors import Conflict, InvalidInput
from store.models import Job
from tests.conftest import BACKENDS, backend_engine


@pytest.fixture(scope="module", params=BACKENDS)
def shared(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "journal") as engine:
        yield engine


@pytest.fixture
def engine(shared):
    """The module's store with an empty journal."""
    with shared.begin() as conn:
        conn.execute(delete(fj.F))
    return shared


TOOL = fj.Origin(kind="tool", call_id="call-1", tool="move-files", caller="ed")


def test_origins_name_a_tool_call_or_a_plan_execution():
    a, b = fj.Origin.for_tool("delete-files", "ed"), fj.Origin.for_tool("delete-files")
    assert a.kind == "tool" and a.tool == "delete-files" and a.caller == "ed" and b.caller is None
    assert len(a.call_id) == 32 and a.call_id != b.call_id
    plan = fj.Origin.for_execution(42)
    assert (plan.kind, plan.call_id, plan.execution_id, plan.tool) == ("plan", "execution-42", 42, None)


def test_an_operation_is_written_down_then_settled_done_or_failed(engine):
    moved = fj.begin(engine, TOOL, op="move", src="/r/a.txt", dst="/r/new/a.txt", entry_id=7, size=3, mtime=1.5,
                     content_hash="xxh128:" + "0" * 32, made=["/r/new"])
    row = fj.get(engine, moved)
    assert row is not None
    assert {k: row[k] for k in ("call_id", "origin", "tool", "caller", "op", "src", "dst", "kind", "entry_id",
                                "size", "mtime", "content_hash", "state", "made", "finished_at")} == {
        "call_id": "call-1", "origin": "tool", "tool": "move-files", "caller": "ed", "op": "move",
        "src": "/r/a.txt", "dst": "/r/new/a.txt", "kind": "file", "entry_id": 7, "size": 3, "mtime": 1.5,
        "content_hash": "xxh128:" + "0" * 32, "state": "intent", "made": ["/r/new"], "finished_at": None}
    crossing = fj.begin(engine, TOOL, op="move", src="/r/big", dst="/mnt/big", kind="directory", size=5 * 2**40)
    fj.copying(engine, crossing)
    gone = fj.begin(engine, TOOL, op="delete", src="/r/b.txt", dst=None)
    assert [(r["id"], r["state"]) for r in fj.in_flight(engine)] == [(moved, "intent"), (crossing, "copying"),
                                                                     (gone, "intent")]
    assert fj.get(engine, crossing)["size"] == 5 * 2**40  # a bigint on both backends

    with engine.begin() as conn:  # done inside the store's transaction: a rollback undoes it too
        fj.done(conn, gone)
        conn.rollback()
    assert fj.get(engine, gone)["state"] == "intent"
    with engine.begin() as conn:
        fj.done(conn, moved, dst="/r/new/a (2).txt")
        fj.done(conn, gone)
    fj.failed(engine, crossing, "no space left on /mnt")
    settled = {r["id"]: r for r in fj.of_call(engine, "call-1")}
    assert settled[moved]["state"] == "done" and settled[moved]["dst"] == "/r/new/a (2).txt"
    assert settled[moved]["finished_at"] >= settled[moved]["created_at"]
    assert settled[crossing]["state"] == "failed" and settled[crossing]["error"] == "no space left on /mnt"
    assert settled[gone]["dst"] is None and fj.in_flight(engine) == []
    assert fj.get(engine, 10**9) is None


def test_bad_operations_are_refused_before_anything_is_written(engine):
    with pytest.raises(InvalidInput, match="unknown file operation 'link'"):
        fj.begin(engine, TOOL, op="link", src="/r/a", dst="/r/b")
    with pytest.raises(InvalidInput, match="unknown kind 'symlink'"):
        fj.begin(engine, TOOL, op="move", src="/r/a", dst="/r/b", kind="symlink")
    with pytest.raises(InvalidInput, match="unknown key"):
        fj.begin_many(engine, TOOL, [{"op": "move", "src": "/r/a", "dst": "/r/b"},
                                     {"op": "move", "src": "/r/c", "dst": "/r/d", "from": "/r/c"}])
    assert fj.of_call(engine, "call-1") == []


def test_a_batch_of_intents_is_written_in_one_transaction_in_its_order(engine):
    plan = fj.Origin.for_execution(9)
    items = [{"op": "move", "src": f"/r/in/{i:05d}.jpg", "dst": f"/r/{i % 7}/{i:05d}.jpg", "size": i,
              "made": [f"/r/{i % 7}"] if i < 7 else []} for i in range(2500)]  # past a page of multi-row inserts
    ids = fj.begin_many(engine, plan, items)
    assert len(ids) == 2500 and ids == sorted(ids) and len(set(ids)) == 2500
    rows = fj.of_call(engine, "execution-9")
    assert [r["id"] for r in rows] == ids and [r["src"] for r in rows] == [i["src"] for i in items]
    assert rows[3]["made"] == ["/r/3"] and rows[9]["made"] == [] and rows[9]["size"] == 9
    assert {(r["origin"], r["execution_id"], r["state"]) for r in rows} == {("plan", 9, "intent")}
    assert fj.begin_many(engine, plan, []) == []


def test_history_by_path_execution_and_call_newest_first(engine):
    a = fj.begin(engine, TOOL, op="move", src="/r/docs/a.txt", dst="/r/archive/a.txt")
    b = fj.begin(engine, fj.Origin.for_execution(3), op="rename", src="/r/docs/b.txt", dst="/r/docs/c.txt")
    c = fj.begin(engine, TOOL, op="trash", src="/r/docsx/d.txt", dst="/trash/files/d.txt")
    d = fj.begin(engine, fj.Origin.for_execution(3), op="copy", src="/r/photos/e.jpg", dst="/r/docs/e.jpg")

    def ids(**filters) -> list[int]:
        return [r["id"] for r in fj.history(engine, **filters)]

    assert ids(path="/r/docs") == [d, b, a]  # src or dst at or under the path; /r/docsx is not under /r/docs
    assert ids(path="/r/docs/") == [d, b, a]
    assert ids(path="/r/archive/a.txt") == [a] and ids(path="/r/docs/c.txt") == [b]
    assert ids(execution_id=3) == [d, b] and ids(call_id="call-1") == [c, a]
    assert ids(path="/r/docs", execution_id=3) == [d, b] and ids(path="/r/photos", call_id="call-1") == []
    assert ids() == [d, c, b, a]
    assert ids(limit=2) == [d, c] and ids(limit=2, offset=2) == [b, a] and ids(offset=4) == []
    with pytest.raises(InvalidInput, match="limit must be 1 or more"):
        fj.history(engine, limit=0)


def test_a_user_limited_to_some_roots_sees_the_operations_with_a_path_under_them(engine):
    inside = fj.begin(engine, TOOL, op="move", src="/r/photos/a.jpg", dst="/r/photos/2024/a.jpg")
    trashed = fj.begin(engine, TOOL, op="trash", src="/r/photos/b.jpg", dst="/home/u/.local/share/Trash/files/b.jpg")
    fj.begin(engine, TOOL, op="move", src="/r/docs/c.txt", dst="/r/docs/old/c.txt")
    deleted = fj.begin(engine, TOOL, op="delete", src="/r/photos/d.jpg", dst=None)
    fj.begin(engine, TOOL, op="delete", src="/r/docs/e.txt", dst=None)
    token = visibility.set_visible(["/r/photos"])
    try:
        assert [r["id"] for r in fj.history(engine, call_id="call-1")] == [deleted, trashed, inside]
        assert fj.history(engine, path="/r/docs") == []
    finally:
        visibility.reset(token)
    token = visibility.set_visible([])
    try:
        assert fj.history(engine, call_id="call-1") == []
    finally:
        visibility.reset(token)
    assert len(fj.history(engine, call_id="call-1")) == 5


def test_an_undone_operation_is_marked_once_and_linked_to_its_undo(engine):
    moved = fj.begin(engine, TOOL, op="move", src="/r/a", dst="/r/b")
    with engine.begin() as conn:
        fj.done(conn, moved)
    undo = fj.begin(engine, fj.Origin.for_tool("undo"), op="move", src="/r/b", dst="/r/a")
    with engine.begin() as conn:
        fj.done(conn, undo)
        fj.mark_undone(conn, moved, by=undo)
    row, by = fj.get(engine, moved), fj.get(engine, undo)
    assert row["state"] == "undone" and row["undone_at"] is not None and by["undo_of"] == moved
    with pytest.raises(Conflict, match=f"file operation {moved} is undone, not done"), engine.begin() as conn:
        fj.mark_undone(conn, moved, by=undo)
    pending = fj.begin(engine, TOOL, op="move", src="/r/c", dst="/r/d")
    with pytest.raises(Conflict, match="is intent, not done"), engine.begin() as conn:
        fj.mark_undone(conn, pending, by=undo)
    with pytest.raises(Conflict, match="no file operation"), engine.begin() as conn:
        fj.mark_undone(conn, 10**9, by=undo)


def test_the_upgrade_turns_an_older_assays_moves_in_flight_into_journal_rows(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'old.db'}", statement_timeout=None, prepare_schema=False)
    try:
        migrate.upgrade(engine, "0001_baseline")
        J = Job.__table__
        with engine.begin() as conn:
            runs = [conn.execute(insert(J).values(kind="move", root="/r/a", status=status, params_json=json.dumps(
                {"tool": tool, "in_flight": intent}), created_at=5.0)).inserted_primary_key[0]
                for tool, status, intent in (
                    ("move-files", "running", {"from": "/r/a", "to": "/r/x/a", "made": ["/r/x"], "mode": "move",
                                               "copying": True}),
                    ("rename-files", "completed", None),
                    ("rename-files", "failed", {"from": "/r/b", "to": "/r/c", "made": [], "mode": "rename",
                                                "copying": False}))]
        migrate.upgrade(engine)
        rows = fj.in_flight(engine)
        assert [(r["call_id"], r["tool"], r["op"], r["src"], r["dst"], r["made"], r["state"]) for r in rows] == [
            (f"run-{runs[0]}", "move-files", "move", "/r/a", "/r/x/a", ["/r/x"], "copying"),
            (f"run-{runs[2]}", "rename-files", "rename", "/r/b", "/r/c", [], "intent")]
        with engine.connect() as conn:
            left = {i: json.loads(p)["in_flight"] for i, p in conn.execute(select(J.c.id, J.c.params_json))}
        assert left == {run: None for run in runs}
    finally:
        engine.dispose()
