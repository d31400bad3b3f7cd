"""The journal of file operations (table ``file_operations``): every move, copy, rename, trash, delete and restore a
tool call or a plan execution makes, written down before the disk changes and crossed out in the transaction that
brings the store in step, so nothing is lost on a crash and every operation can be listed and undone.

An operation's life: :func:`begin` (state ``intent``, committed before the first change to the disk; a plan writes a
batch of intents at once with :func:`begin_many`), :func:`copying` (a move across filesystems copies first and removes
the source after), then :func:`done` inside the transaction that updates the store, or :func:`failed` when the disk
is as it was. What a crash leaves in ``intent`` or ``copying`` is :func:`in_flight`: the next start settles it by
what the disk shows (flows/fileops/recovery.py). An undo journals its own operations (``undo_of``) and marks the
reversed one with :func:`mark_undone`.

Who asked is the :class:`Origin`: one tool call (a fresh ``call_id``) or one plan execution
(``call_id`` ``"execution-<id>"``), with the guarded server's user. :func:`history` lists the journal newest first;
a user limited to some roots sees the operations with a path under them (store.visibility).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sqlalchemy import ColumnElement, Select, and_, bindparam, insert, or_, select, text, update
from sqlalchemy.engine import Connection, Engine

from store.entries import driver_connection, iso
from store.errors import Conflict, InvalidInput
from store.models import FileOperation, now
from store.models.columns import inserted_id
from store.visibility import limited, path_subtree, visible_clause

F = FileOperation.__table__

OPS = ("move", "copy", "rename", "trash", "delete", "restore")
KINDS = ("file", "directory")
STATES = ("intent", "copying", "done", "failed", "undone", "purged")  # purged: a trash emptied for good
IN_FLIGHT = ("intent", "copying")
_ITEM_KEYS = frozenset({"op", "src", "dst", "kind", "entry_id", "size", "mtime", "content_hash", "made", "undo_of"})


@dataclass(frozen=True)
class Origin:
    """Who asked for the operations: a tool call or a plan execution (and, on a guarded server, which user)."""

    kind: Literal["tool", "plan"]
    call_id: str
    tool: str | None = None
    execution_id: int | None = None
    caller: str | None = None

    @classmethod
    def for_tool(cls, tool: str, caller: str | None = None) -> Origin:
        """One call of ``tool``, under a fresh call id (the handle an agent undoes the whole call by)."""
        return cls(kind="tool", call_id=uuid.uuid4().hex, tool=tool, caller=caller)

    @classmethod
    def for_execution(cls, execution_id: int) -> Origin:
        """Plan execution ``execution_id``: its call id is ``execution-<id>``, the same for every batch of it."""
        return cls(kind="plan", call_id=f"execution-{execution_id}", execution_id=execution_id)


# --- writing --------------------------------------------------------------------------------------------------------


def _row(origin: Origin, *, op: str, src: str, dst: str | None, kind: str = "file", entry_id: int | None = None,
         size: int | None = None, mtime: float | None = None, content_hash: str | None = None,
         made: Sequence[str] = (), undo_of: int | None = None) -> dict[str, Any]:
    if op not in OPS:
        raise InvalidInput(f"unknown file operation {op!r}; known: {', '.join(OPS)}", field="op")
    if kind not in KINDS:
        raise InvalidInput(f"unknown kind {kind!r} of a journalled file; known: {', '.join(KINDS)}", field="kind")
    if not src:
        raise InvalidInput("a file operation needs the path it acts on (src)", field="src")
    return {"call_id": origin.call_id, "origin": origin.kind, "tool": origin.tool,
            "execution_id": origin.execution_id, "caller": origin.caller, "op": op, "src": src, "dst": dst,
            "kind": kind, "entry_id": entry_id, "size": size, "mtime": mtime, "content_hash": content_hash,
            "state": "intent", "made_json": json.dumps(list(made)), "error": None, "created_at": now(),
            "finished_at": None, "undone_at": None, "undo_of": undo_of}


def begin(engine: Engine, origin: Origin, *, op: str, src: str, dst: str | None, kind: str = "file",
          entry_id: int | None = None, size: int | None = None, mtime: float | None = None,
          content_hash: str | None = None, made: Sequence[str] = (), undo_of: int | None = None) -> int:
    """Write one operation down (state ``intent``), committed before the disk changes; its id."""
    row = _row(origin, op=op, src=src, dst=dst, kind=kind, entry_id=entry_id, size=size, mtime=mtime,
               content_hash=content_hash, made=made, undo_of=undo_of)
    with engine.begin() as conn:
        return inserted_id(conn.execute(insert(F).values(**row)))


def begin_many(engine: Engine, origin: Origin, items: Sequence[dict[str, Any]]) -> list[int]:
    """Write a batch of operations down in one transaction (each item: the keyword arguments of :func:`begin`);
    their ids, in the items' order."""
    rows = []
    for i, item in enumerate(items):
        unknown = sorted(set(item) - _ITEM_KEYS)
        if unknown:
            raise InvalidInput(f"item {i} of the batch has unknown key(s) {', '.join(unknown)}; known: "
                               f"{', '.join(sorted(_ITEM_KEYS))}", field="items")
        rows.append(_row(origin, **item))
    if not rows:
        return []
    with engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            # the ids drawn from the column's sequence first, then the rows inserted with them, a page of rows per
            # statement: INSERT .. RETURNING in the rows' order would be one statement (a round trip) per row
            ids = sorted(int(i) for i in conn.execute(
                text("SELECT nextval(pg_get_serial_sequence(:table, 'id')) FROM generate_series(1, :n)"),
                {"table": F.name, "n": len(rows)}).scalars())
            conn.execute(insert(F), [{**row, "id": op_id} for row, op_id in zip(rows, ids)])
            return ids
        if conn.dialect.name != "sqlite":  # another backend: one INSERT .. RETURNING per page of rows, in order
            result = conn.execute(insert(F).returning(F.c.id, sort_by_parameter_order=True), rows)
            return [int(i) for i in result.scalars()]
        # SQLite would return ids in order only by one INSERT per row (SQLAlchemy's fallback: ~30 us a row). One
        # executemany instead: the writer's lock is held from the first row to the commit, so the batch's rows are
        # the last of its call, with consecutive ids in the items' order.
        names = list(rows[0])  # every row has _row's keys, in its order; the DBAPI's executemany, not SQLAlchemy's
        cursor = driver_connection(conn).cursor()  # per-row parameter processing (~20 us a row)
        try:
            cursor.executemany(f"INSERT INTO {F.name} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
                               [tuple(row[n] for n in names) for row in rows])
        finally:
            cursor.close()
        last = conn.execute(select(F.c.id).where(F.c.call_id == origin.call_id).order_by(F.c.id.desc())
                            .limit(len(rows))).scalars()
        return sorted(int(i) for i in last)


def copying(engine: Engine, op_id: int) -> None:
    """Operation ``op_id`` crosses filesystems: its source is copied, then removed (committed before the copy)."""
    with engine.begin() as conn:
        conn.execute(update(F).where(F.c.id == op_id).values(state="copying"))


def retarget(engine: Engine, op_id: int, dst: str) -> None:
    """Operation ``op_id``, still in flight, goes to ``dst`` instead (its planned place was taken meanwhile):
    committed before the disk changes, as its intent was."""
    with engine.begin() as conn:
        conn.execute(update(F).where(F.c.id == op_id, F.c.state.in_(IN_FLIGHT)).values(dst=dst))


def finish(conn: Connection, op_id: int, *, state: Literal["done", "failed"], error: str | None = None,
           dst: str | None = None) -> None:
    """Settle operation ``op_id`` in the caller's transaction: ``done`` (with the destination it ended at, when that
    differs from the one written down) or ``failed``; ``error`` says why, or what a recovery found."""
    values: dict[str, Any] = {"state": state, "error": error, "finished_at": now()}
    if dst is not None:
        values["dst"] = dst
    conn.execute(update(F).where(F.c.id == op_id).values(**values))


def done(conn: Connection, op_id: int, *, dst: str | None = None) -> None:
    """Operation ``op_id`` happened: called inside the transaction that brings the store in step with the disk."""
    finish(conn, op_id, state="done", dst=dst)


def done_many(conn: Connection, op_ids: Sequence[int]) -> None:
    """Operations ``op_ids`` happened (a batch: one statement per 500 ids): in the store's transaction."""
    when = now()
    for i in range(0, len(op_ids), _CHUNK):
        conn.execute(update(F).where(F.c.id.in_(list(op_ids[i:i + _CHUNK]))).values(state="done", finished_at=when))


def mark_undone_many(conn: Connection, pairs: Sequence[tuple[int, int]]) -> None:
    """``mark_undone`` for a batch of (operation, the one that reversed it): the operations marked by one statement
    per 500, the reversing ones' ``undo_of`` by one statement executed for the batch; when an operation of the batch
    is no longer done, the whole batch is refused as in ``mark_undone``."""
    if not pairs:
        return
    ops, when, changed = sorted({op for op, _ in pairs}), now(), 0
    for i in range(0, len(ops), _CHUNK):
        res = conn.execute(update(F).where(F.c.id.in_(ops[i:i + _CHUNK]), F.c.state == "done")
                           .values(state="undone", undone_at=when))
        changed += res.rowcount if res.rowcount is not None and res.rowcount >= 0 else len(ops[i:i + _CHUNK])
    if changed < len(ops):
        raise Conflict("some of these file operations were undone meanwhile: only a done operation can be undone",
                       field="id")
    if conn.dialect.name == "sqlite":  # the DBAPI's executemany: no per-row parameter processing
        cursor = driver_connection(conn).cursor()
        try:
            cursor.executemany(f"UPDATE {F.name} SET undo_of = ? WHERE id = ? AND undo_of IS NULL",
                               [(op, by) for op, by in pairs])
        finally:
            cursor.close()
        return
    conn.execute(update(F).where(F.c.id == bindparam("by_id"), F.c.undo_of.is_(None))
                 .values(undo_of=bindparam("op_id")), [{"by_id": by, "op_id": op} for op, by in pairs])


_CHUNK = 500  # ids in one IN (...)


def failed(engine: Engine, op_id: int, error: str) -> None:
    """Operation ``op_id`` did not happen: the disk is as it was (nothing moved, or what moved was put back)."""
    with engine.begin() as conn:
        finish(conn, op_id, state="failed", error=error)


def mark_undone(conn: Connection, op_id: int, *, by: int) -> None:
    """Operation ``op_id`` was reversed by operation ``by`` (whose ``undo_of`` is set to it when not yet): in the
    caller's transaction. Only a done operation can be undone; one undone, failed or in flight is refused (a second
    undo racing the first loses here)."""
    res = conn.execute(update(F).where(F.c.id == op_id, F.c.state == "done").values(state="undone", undone_at=now()))
    if not res.rowcount:
        state = conn.execute(select(F.c.state).where(F.c.id == op_id)).scalar()
        if state is None:
            raise Conflict(f"no file operation {op_id} in the journal", field="id")
        raise Conflict(f"file operation {op_id} is {state}, not done: only a done operation can be undone",
                       field="id")
    conn.execute(update(F).where(F.c.id == by, F.c.undo_of.is_(None)).values(undo_of=op_id))


# --- reading --------------------------------------------------------------------------------------------------------


def _public(row: Any) -> dict[str, Any]:
    out = dict(row)
    out["made"] = json.loads(out.get("made_json") or "[]")
    return out


def operation_public(row: dict[str, Any]) -> dict[str, Any]:
    """The shape file-history returns for an operation (times ISO 8601 UTC)."""
    return {"id": row["id"], "time": iso(row["created_at"]), "op": row["op"], "from": row["src"], "to": row["dst"],
            "kind": row["kind"], "state": row["state"], "origin": row["origin"], "tool": row["tool"],
            "executionId": row["execution_id"], "callId": row["call_id"], "caller": row["caller"],
            "contentHash": row["content_hash"], "error": row["error"], "undoneAt": iso(row["undone_at"]),
            "undoOf": row["undo_of"]}


def _rows(engine: Engine, query: Select[Any]) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [_public(r) for r in conn.execute(query).mappings()]


def get(engine: Engine, op_id: int) -> dict[str, Any] | None:
    """Operation ``op_id`` (its columns, and ``made``: the folders created for it), or None."""
    found = _rows(engine, select(F).where(F.c.id == op_id))
    return found[0] if found else None


def in_flight(engine: Engine) -> list[dict[str, Any]]:
    """The operations written down and not settled (``intent`` or ``copying``), oldest first: what a crash left."""
    return _rows(engine, select(F).where(F.c.state.in_(IN_FLIGHT)).order_by(F.c.id))


def of_call(engine: Engine, call_id: str) -> list[dict[str, Any]]:
    """Every operation of one tool call or plan execution, in the order they were written down."""
    return _rows(engine, select(F).where(F.c.call_id == call_id).order_by(F.c.id))


def _visible() -> ColumnElement[bool]:
    """An operation a limited caller may see: one of its paths under the caller's roots (a file trashed from them
    has its ``dst`` in a trash outside; a restore its ``src``)."""
    return or_(visible_clause(F.c.src), and_(F.c.dst.is_not(None), visible_clause(F.c.dst)))


def history(engine: Engine, *, path: str | None = None, execution_id: int | None = None,
            call_id: str | None = None, limit: int = 100, offset: int = 0) -> list[dict[str, Any]]:
    """The journal, newest first, narrowed by each filter given: ``path`` matches an operation whose ``src`` or
    ``dst`` is that path or under it (a folder's history holds its files'), ``execution_id`` and ``call_id`` their
    columns. A caller limited to some roots sees only operations on paths under them."""
    if limit < 1:
        raise InvalidInput(f"limit must be 1 or more, got {limit}", field="limit")
    if offset < 0:
        raise InvalidInput(f"offset must be 0 or more, got {offset}", field="offset")
    where: list[ColumnElement[bool]] = []
    if path is not None:
        top = path.rstrip("/") or "/"
        where.append(or_(path_subtree(F.c.src, top), path_subtree(F.c.dst, top)))
    if execution_id is not None:
        where.append(F.c.execution_id == execution_id)
    if call_id is not None:
        where.append(F.c.call_id == call_id)
    if limited():
        where.append(_visible())
    return _rows(engine, select(F).where(*where).order_by(F.c.id.desc()).limit(limit).offset(offset))



# --- the trash ------------------------------------------------------------------------------------------------------


def trashed(engine: Engine, *, path: str | None = None, before: float | None = None,
            ids: Sequence[int] | None = None, limit: int | None = None, offset: int = 0) -> list[dict[str, Any]]:
    """What assay put in a trash and is there still as far as the journal knows (``trash`` operations done, neither
    undone nor purged), oldest first: narrowed to those from ``path`` or under it, trashed before ``before`` (epoch
    seconds), or the operations ``ids``. A caller limited to some roots sees only what came from under them."""
    where: list[ColumnElement[bool]] = [F.c.op == "trash", F.c.state == "done", F.c.dst.is_not(None)]
    if path is not None:
        where.append(path_subtree(F.c.src, path.rstrip("/") or "/"))
    if before is not None:
        where.append(F.c.finished_at < before)
    if ids is not None:
        where.append(F.c.id.in_(list(ids)))
    if limited():
        where.append(visible_clause(F.c.src))
    query = select(F).where(*where).order_by(F.c.finished_at, F.c.id).offset(offset)
    return _rows(engine, query if limit is None else query.limit(limit))


def mark_purged(conn: Connection, op_ids: Sequence[int], *, note: str) -> int:
    """Trash operations ``op_ids`` were emptied for good (``note`` says by what): state ``purged``, the time in
    ``undone_at``; only rows still ``done`` change (an undo that restored one meanwhile keeps it). How many changed."""
    if not op_ids:
        return 0
    res = conn.execute(update(F).where(F.c.id.in_(list(op_ids)), F.c.op == "trash", F.c.state == "done")
                       .values(state="purged", undone_at=now(), error=note))
    return int(res.rowcount or 0)
