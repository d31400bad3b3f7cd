"""Resource ids: the readable, stable names files are cited under (``doc://lecture_notes#pages=3``).

A file's id comes from its name (:func:`slug` of the stem), made unique among the ids already taken by trying
:func:`candidates` in order: ``report``, then ``report_pdf`` (the extension tells two files of one stem apart), then
``report_2``, ``report_3``, .... Once given, an id is kept in ``resource_maps`` (a row with origin "none" when the
file has no map yet) and never changes while the file's entry exists, so a citation stays valid.

:func:`reserve_ids` is what search hits (``flows.documents.citing.hit_ids``) and the citation service call: one SELECT
for the entries that have ids already (the common case: a search's hits cost one indexed query), and one short insert
transaction for the others. Two callers reserving at once are safe: the insert transaction holds a reservation lock (a
PostgreSQL advisory lock; SQLite's write lock) and looks the entries up again inside it, so the second caller sees the
id the first just gave the same entry; the unique constraint on ``resource_id`` backs this up.
"""

from __future__ import annotations

import itertools
import logging
import re
import time
import unicodedata
from pathlib import PurePath
from typing import Iterable, Iterator

from sqlalchemy import ColumnElement, false, insert, select, text, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from store.models import Entry, ResourceMapRow

log = logging.getLogger(__name__)

R = ResourceMapRow.__table__

MAX_STEM = 100  # characters of the name kept in an id; "_<ext>" and "_<n>" may follow (ids are at most 128)
MAX_EXT = 20
FALLBACK = "resource"  # the id of a name with nothing readable left in it (all punctuation, or a script we drop)
_LOOKUP_BATCH = 500  # ids asked for in one IN (...) (PostgreSQL and SQLite both take far more; kept modest)
_PROBE = 8  # candidates of one file looked up at once when choosing a free one
_RETRIES = 5  # reservation transactions started over after a unique-constraint refusal
_LOCK_KEY = 0x61737361_79ce0003  # PostgreSQL advisory lock of the id reservation ("assay", citations)

_NOT_KEPT = re.compile(r"[^A-Za-z0-9_.\-]+")
_UNDERSCORES = re.compile(r"_{2,}")
_LEADING = re.compile(r"^[^A-Za-z0-9]+")


def slug(name: str) -> str:
    """``name`` as an id: accents dropped (``résumé`` -> ``resume``), anything but letters, digits, ``_``, ``.`` and
    ``-`` replaced by ``_`` (runs of ``_`` collapsed), leading non-alphanumerics and trailing ``_`` dropped, at most
    100 characters; "resource" when nothing is left. Matches :data:`flows.addresses.model.RESOURCE_ID_PATTERN`."""
    text = unicodedata.normalize("NFKD", name)
    text = "".join(ch for ch in text if not unicodedata.combining(ch))
    text = _UNDERSCORES.sub("_", _NOT_KEPT.sub("_", text))
    text = _LEADING.sub("", text)[:MAX_STEM].rstrip("_")
    return text or FALLBACK


def _stem_and_ext(path: str) -> tuple[str, str]:
    """The slugged stem and extension (without its dot, lower case, "" when none) of the file's name."""
    name = PurePath(path).name
    stripped = name.lstrip(".")  # ".bashrc" is a name, not an extension
    dot = stripped.rfind(".")
    if dot > 0:
        stem, ext = stripped[:dot], stripped[dot + 1:]
    else:
        stem, ext = stripped, ""
    ext_slug = _LEADING.sub("", _NOT_KEPT.sub("_", ext.lower()))[:MAX_EXT].rstrip("_.-") if ext else ""
    return slug(stem or name), ext_slug


def candidates(path: str) -> Iterator[str]:
    """The ids the file at ``path`` may get, best first: its stem (``report``), the stem and the extension
    (``report_pdf``), then ``report_2``, ``report_3``, ... without end."""
    stem, ext = _stem_and_ext(path)
    yield stem
    if ext:
        yield f"{stem}_{ext}"
    n = 2
    while True:
        yield f"{stem}_{n}"
        n += 1


def existing_ids(engine_or_conn: Engine | Connection, entry_ids: Iterable[int]) -> dict[int, str]:
    """entry id -> resource id for the entries that have one (the first reserved, when a race left two)."""
    wanted = sorted({int(e) for e in entry_ids})
    out: dict[int, str] = {}
    if not wanted:
        return out

    def read(conn: Connection) -> None:
        for start in range(0, len(wanted), _LOOKUP_BATCH):
            rows = conn.execute(select(R.c.entry_id, R.c.resource_id)
                                .where(R.c.entry_id.in_(wanted[start:start + _LOOKUP_BATCH]))
                                .order_by(R.c.id.desc()))
            for entry_id, resource_id in rows:
                out[int(entry_id)] = resource_id  # ordered newest first: the oldest row's id wins

    if isinstance(engine_or_conn, Connection):
        read(engine_or_conn)
    else:
        with engine_or_conn.connect() as conn:
            read(conn)
    return out


def _taken(conn: Connection, names: list[str]) -> set[str]:
    if not names:
        return set()
    return {r for (r,) in conn.execute(select(R.c.resource_id).where(R.c.resource_id.in_(names)))}


def _row(resource_id: str, entry_id: int, modality: str) -> dict:
    return {"resource_id": resource_id, "entry_id": entry_id, "kind": modality, "origin": "none",
            "created_at": time.time()}


def _lock(conn: Connection) -> None:
    """Make this transaction the only one reserving ids until it ends: PostgreSQL takes a transaction-scoped
    advisory lock; SQLite takes the store's write lock at once (a write that changes nothing), so what is read next
    is what the insert will meet. Held for a few milliseconds: two lookups and one insert."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": _LOCK_KEY})
    else:
        conn.execute(update(R).where(false()).values(origin=R.c.origin))


def _live_entries(conn: Connection, entry_ids: list[int]) -> set[int]:
    """The entries among ``entry_ids`` that still exist (one deleted meanwhile gets no id)."""
    E = Entry.__table__
    return {int(e) for (e,) in conn.execute(select(E.c.id).where(E.c.id.in_(entry_ids)))}


def _numbered_taken(conn: Connection, stem: str) -> set[int]:
    """The numbers n of the ids ``<stem>_<n>`` taken, in one query over the ids starting ``<stem>_``: a range on
    SQLite (byte order: the unique index answers it), LIKE on PostgreSQL (whose collation may not order bytes; ids
    hold no ``%`` or ``\\``, and ``_`` is escaped)."""
    prefix = stem + "_"
    where: ColumnElement[bool]
    if conn.dialect.name == "sqlite":
        where = (R.c.resource_id >= prefix) & (R.c.resource_id < stem + "`")  # "`" follows "_"
    else:
        where = R.c.resource_id.like(prefix.replace("_", "\\_") + "%", escape="\\")
    rows = conn.execute(select(R.c.resource_id).where(where))
    return {int(r[len(prefix):]) for (r,) in rows
            if r.startswith(prefix) and r[len(prefix):].isdigit() and not r[len(prefix):].startswith("0")}


def _choose(conn: Connection, pending: list[tuple[int, str, str]]) -> dict[int, str]:
    """The first free candidate of each pending item (in the order given), as the store is now and not claimed by
    an earlier item of the same batch. The first few candidates of every file are looked up in one query, so a
    batch without collisions costs one; a file whose name is common (a thousand ``README.md``) then costs one more
    query for the numbers its stem has taken."""
    chosen: dict[int, str] = {}
    claimed: set[str] = set()
    probes = {entry_id: list(itertools.islice(candidates(path), _PROBE)) for entry_id, path, _ in pending}
    taken = set()
    names = sorted({n for names in probes.values() for n in names})
    for start in range(0, len(names), _LOOKUP_BATCH):
        taken |= _taken(conn, names[start:start + _LOOKUP_BATCH])
    numbered: dict[str, tuple[set[int], int]] = {}  # stem -> (numbers taken in the store, the next one to try)
    for entry_id, _path, _ in pending:
        free = next((n for n in probes[entry_id] if n not in taken and n not in claimed), None)
        if free is None:  # the first candidates are all taken: the smallest number the stem has free
            stem = probes[entry_id][0]
            used, n = numbered.get(stem) or (_numbered_taken(conn, stem), 2)
            while n in used or f"{stem}_{n}" in claimed:
                n += 1
            numbered[stem] = (used, n + 1)
            free = f"{stem}_{n}"
        chosen[entry_id] = free
        claimed.add(free)
    return chosen


def reserve_ids(engine: Engine, items: list[tuple[int, str, str]]) -> dict[int, str]:
    """entry id -> resource id for each ``(entry id, absolute path, modality)``.

    The ids entries have already come from one SELECT (a search's hits: one indexed query, nothing written). The
    others get the first free :func:`candidates` of their path, in the order given, inserted as rows of origin
    "none" with ``kind`` = the modality, in one short transaction that holds the reservation lock (:func:`_lock`):
    inside it the entries are looked up again, so a caller that reserved the same entry a moment before is seen and
    its id returned, never a second one. An entry deleted meanwhile is left out of the answer. A row another writer
    inserted without the lock (a unique-constraint refusal) makes the transaction start over."""
    out = existing_ids(engine, (entry_id for entry_id, _, _ in items))
    pending: dict[int, tuple[int, str, str]] = {}
    for entry_id, path, modality in items:
        if int(entry_id) not in out:
            pending.setdefault(int(entry_id), (int(entry_id), path, modality))
    if not pending:
        return out
    for attempt in range(_RETRIES):
        try:
            with engine.begin() as conn:
                _lock(conn)
                found = existing_ids(conn, pending)
                live = _live_entries(conn, [e for e in pending if e not in found])
                todo = [pending[e] for e in pending if e in live]
                chosen = _choose(conn, todo)
                if chosen:
                    conn.execute(insert(R), [_row(chosen[e], e, modality) for e, _, modality in todo])
        except IntegrityError:
            log.debug("a resource id was reserved outside the lock meanwhile; reserving again (attempt %d)",
                      attempt + 1)
            continue
        out.update(found)
        out.update(chosen)
        if chosen:
            log.debug("reserved resource ids %s", ", ".join(f"{e}={r}" for e, r in sorted(chosen.items())))
        return out
    raise RuntimeError(f"could not reserve resource ids for entries {sorted(pending)[:10]} after {_RETRIES} "
                       "attempts (the store kept refusing them)")
