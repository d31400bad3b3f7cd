"""What the text engine reads from the store: the change log (``document_changes``) and the extracted text of the
documents it (re)indexes, in short reads."""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import numpy as np
from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from store.models import Chunk, Document, DocumentChange, DocumentSegment, Entry
from store.textindex.segment import DocIn

C = DocumentChange.__table__
D = Document.__table__
S = DocumentSegment.__table__
E = Entry.__table__
K = Chunk.__table__

CHUNK = 200  # entries per read
CHARS = 16_000_000  # ... and about this many characters of text


def last_change(engine: Engine) -> int:
    """The newest change number (0 when nothing was ever written)."""
    with engine.connect() as conn:
        return int(conn.execute(select(func.coalesce(func.max(C.c.seq), 0))).scalar_one())


def changes_after(engine: Engine, seq: int, limit: int = 100_000) -> list[tuple[int, int]]:
    """(change number, entry id) of the changes after ``seq``, oldest first, at most ``limit``."""
    with engine.connect() as conn:
        return [(int(s), int(e)) for s, e in conn.execute(
            select(C.c.seq, C.c.entry_id).where(C.c.seq > seq).order_by(C.c.seq).limit(limit))]


def searchable_entries(engine: Engine) -> list[int]:
    """Every entry whose extracted text is searchable (documents status ok)."""
    with engine.connect() as conn:
        return [int(e) for (e,) in conn.execute(select(D.c.entry_id).where(D.c.status == "ok").order_by(D.c.entry_id))]


def entry_paths(engine: Engine, entry_ids: Iterable[int]) -> dict[int, str]:
    ids = list(entry_ids)
    out: dict[int, str] = {}
    with engine.connect() as conn:
        for i in range(0, len(ids), 900):
            out.update((int(k), p) for k, p in conn.execute(
                select(E.c.id, E.c.path).where(E.c.id.in_(ids[i:i + 900]))))
    return out


def collection_units(engine: Engine, collection_id: int
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """A semantic collection's chunks as passages of lines: (ids, entries, first lines, last lines, lengths in
    characters), ordered by id."""
    with engine.connect() as conn:
        rows = conn.execute(select(K.c.id, K.c.entry_id, K.c.line_start, K.c.line_end, K.c.end - K.c.start)
                            .where(K.c.collection_id == collection_id).order_by(K.c.id)).all()
    cols = list(zip(*rows)) if rows else [(), (), (), (), ()]
    return (np.array(cols[0], dtype=np.int64), np.array(cols[1], dtype=np.int64), np.array(cols[2], dtype=np.int64),
            np.array(cols[3], dtype=np.int64), np.maximum(np.array(cols[4], dtype=np.float64), 1.0))


def read_documents(engine: Engine, entry_ids: Iterable[int], version: int) -> Iterator[DocIn]:
    """The current searchable text of these entries (those with a documents row of status ok; the others are
    skipped), each as one DocIn with its page runs, read a few documents at a time."""
    ids = sorted(set(entry_ids))
    for i in range(0, len(ids), CHUNK):
        with engine.connect() as conn:
            meta = conn.execute(select(D.c.entry_id, D.c.format, D.c.chars, E.c.path)
                                .select_from(D.join(E, E.c.id == D.c.entry_id))
                                .where(D.c.status == "ok", D.c.entry_id.in_(ids[i:i + CHUNK]))
                                .order_by(D.c.entry_id)).all()
        group: list[Any] = []
        chars = 0
        for row in meta:
            group.append(row)
            chars += int(row.chars or 0)
            if chars >= CHARS:
                yield from _read(engine, group, version)
                group, chars = [], 0
        if group:
            yield from _read(engine, group, version)


def _read(engine: Engine, meta: list[Any], version: int) -> Iterator[DocIn]:
    by_id = {int(m.entry_id): m for m in meta}
    with engine.connect() as conn:
        rows = conn.execute(select(S.c.entry_id, S.c.page, S.c.ocr, S.c.line_count, S.c.text)
                            .where(S.c.entry_id.in_(list(by_id))).order_by(S.c.entry_id, S.c.seq)).all()
    current: int | None = None
    parts: list[str] = []
    runs: list[tuple[int, int, bool]] = []
    lines = 0

    def done() -> DocIn:
        assert current is not None
        m = by_id[current]
        return DocIn(current, version, m.path, m.format, runs=runs or [(1, 1, False)], text="\n".join(parts))

    for entry_id, page, ocr, line_count, text in rows:  # a document's segments: contiguous runs of its lines
        if entry_id != current:
            if current is not None:
                yield done()
            current, parts, runs, lines = int(entry_id), [], [], 0
        if not runs or runs[-1][1] != page or runs[-1][2] != bool(ocr):
            runs.append((lines + 1, int(page), bool(ocr)))
        parts.append(text)
        lines += int(line_count)
    if current is not None:
        yield done()
