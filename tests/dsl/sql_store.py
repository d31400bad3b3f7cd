"""The store the dsl.sql tests run against: a corpus of entries with metadata, set memberships and extracted text in a
real store (SQLite, or a throw-away PostgreSQL database), and the two condition contexts over its tables, so a
condition is tested in SQL (dsl.sql.to_sql) and in Python (dsl.evaluate) alike.

Computed fields (``duplicates``) are worked out by the store's registry (flows.core.conditions, filled by
flows.classify.fields): the contexts here hand them over to it, so the agreement covers the real code."""

from __future__ import annotations

import contextlib
from typing import Any, Iterator

from sqlalchemy import exists, insert, select, true

from dsl.evaluate import evaluate
from dsl.sql import split, to_sql
import flows.classify.fields  # noqa: F401  (installs the classifier's fields: metadata producer, duplicates)
import flows.documents.conditions  # noqa: F401  (installs the text field)
from flows.documents.model import FILTER_FAILED, Extracted, Page
from flows.core.conditions import computed_field, content_field
from store.documents import DocumentWrite, write_extracted_many
from store.models import Entry, MetadataValue, ResourceSet, SetMember
from tests.conftest import backend_engine

ENTRIES, META = Entry.__table__, MetadataValue.__table__
SETS, MEMBERS = ResourceSet.__table__, SetMember.__table__

NOW = 1718452800.0  # 2024-06-15T12:00:00Z
DAY0 = 1704067200.0  # 2024-01-01T00:00:00Z
DAY = 86400.0
HOME = "/home/user"


# --- the corpus: names are unique, so tests name the entries they expect ----------------------------------------------


def _entry(path: str, kind: str = "file", size: int = 0, mtime: float = DAY0 + 3600, media_type: str | None = None,
           mime: str | None = None, hash: str | None = None) -> dict[str, Any]:
    parent, _, name = path.rpartition("/")
    extension = ("." + name.rsplit(".", 1)[1].lower()) if kind != "directory" and "." in name.lstrip(".") else ""
    return {"path": path, "parent": (parent or "/") if path != "/" else None, "name": name, "extension": extension,
            "kind": kind, "size": size, "mtime": mtime, "ctime": mtime + 60, "depth": path.count("/") if path != "/"
            else 0, "media_type": media_type, "mime": mime, "hash": hash, "indexed_at": NOW}


def _file(rel: str, size: int, media_type: str | None, mime: str | None = None, **kw) -> dict[str, Any]:
    return _entry(f"{HOME}/{rel}", "file", size, media_type=media_type, mime=mime, **kw)


CORPUS = [
    _entry("/", "directory", 10**10, media_type=None),
    _entry("/home", "directory", 10**10 - 1),
    _entry(HOME, "directory", 10**10 - 2, mtime=NOW - 60),
    _entry(f"{HOME}/Photos", "directory", 50000),
    _entry(f"{HOME}/Videos", "directory", 4 * 10**9),
    _entry(f"{HOME}/docs", "directory", 9000),
    _entry(f"{HOME}/t", "directory", 40),
    _entry(f"{HOME}/empty", "directory", 0),
    _file("Photos/beach.jpg", 3000, "image", "image/jpeg", mtime=DAY0 + 10, hash="aa11"),
    _file("Photos/sunset.JPG", 2000, "image", "image/jpeg", mtime=DAY0 - DAY),
    _file("Photos/vacation/IMG_0001.jpeg", 5000, "image", "image/jpeg"),
    _file("Photos/100%_real.png", 1000, "image", "image/png"),
    _file("Photos/café.jpg", 1500, "image", "image/jpeg", hash="aa11"),
    _file("Photos/写真.png", 2500, "image", "image/png", hash="aa11"),
    _file("Photos/emoji😀.gif", 700, "image", None),
    _file("Videos/movie.mp4", 2 * 10**9, "video", "video/mp4", mtime=NOW - 3 * DAY, hash="bb22"),
    _file("Videos/clip.mov", 8000, "video", "video/quicktime"),
    _file("Videos/big_file.mkv", 3 * 2**29, "video", None, mtime=NOW - 400 * DAY),
    _file("docs/report_2024.pdf", 1500, "document", "application/pdf", hash="cc33"),
    _file("docs/report%2024.pdf", 1501, "document", "application/pdf"),
    _file("docs/readme.md", 120, "text", "text/markdown"),
    _file("docs/notes.txt", 10, "text", "text/plain"),
    _file("docs/deep/a/b/c.txt", 7, "text", "text/plain"),
    _file(".hidden", 1, None),
    _file("Makefile", 300, None),
    _file("archive.tar.gz", 10**6, "other", "application/gzip"),
    _file("song.mp3", 4 * 10**6, "audio", "audio/mpeg"),
    _file("podcast.ogg", 9 * 10**6, "audio", None),
    _file("weird name with spaces.txt", 5, "text"),
    _file("new\nline.txt", 5, "text"),
    _file("back\\slash.txt", 5, "text"),
    _file("[brackets].txt", 5, "text"),
    _file("star*.txt", 5, "text"),
    _file("quote'\".txt", 5, "text"),
    _entry(f"{HOME}/link.jpg", "symlink", 0, media_type="image"),
    _file("UPPER.PDF", 2048, "document", "application/pdf", hash="cc33"),
    _file("a_b.txt", 3, "text"),
    _file("aXb.txt", 3, "text"),
    _file("empty.txt", 0, "text"),
    _file("t/midnight.txt", 1, "text", mtime=DAY0),
    _file("t/end_of_day.txt", 1, "text", mtime=DAY0 + DAY - 0.5),
    _file("t/next_day.txt", 1, "text", mtime=DAY0 + DAY),
    _file("t/before.txt", 1, "text", mtime=DAY0 - 0.5),
    _file("t/future.txt", 1, "text", mtime=NOW + 7200),
    _file("t/week_old.txt", 1, "text", mtime=NOW - 7 * DAY),
]
NAMES = {e["name"] for e in CORPUS}
assert len(NAMES) == len(CORPUS)

# (entry name, key, num_value, text_value)
METADATA = [
    ("beach.jpg", "width", 1920, None), ("beach.jpg", "height", 1080, None),
    ("beach.jpg", "exif.Model", None, "Canon EOS"),
    ("sunset.JPG", "width", 800, None), ("sunset.JPG", "height", 600, None),
    ("sunset.JPG", "exif.Model", None, "iPhone"),
    ("IMG_0001.jpeg", "width", 4000, "4000"),  # both stored: the number counts
    ("IMG_0001.jpeg", "exif.ISO", 100, None),
    ("100%_real.png", "width", 100, None), ("100%_real.png", "exif.ISO", None, "auto"),
    ("café.jpg", "exif.Model", None, "Café Cam"),
    ("movie.mp4", "duration", 5400.0, None), ("movie.mp4", "width", 3840, None), ("movie.mp4", "codec", None, "h264"),
    ("clip.mov", "duration", 0.5, None), ("clip.mov", "codec", None, "prores"),
    ("big_file.mkv", "duration", 7200.0, None),
    ("report_2024.pdf", "pages", 12, None), ("report_2024.pdf", "title", None, "Annual Report"),
    ("report_2024.pdf", "author", None, "Ann"),
    ("report%2024.pdf", "pages", 3, None), ("report%2024.pdf", "title", None, "100% sure"),
    ("report%2024.pdf", "author", None, "Émile"),
    ("readme.md", "title", None, "readme"),
    ("song.mp3", "duration", 180.0, None), ("song.mp3", "year", 1999, "1999"), ("song.mp3", "title", None, "1999"),
    ("podcast.ogg", "year", None, "MCMXCIX"),
    ("UPPER.PDF", "pages", 0, None),
    ("Makefile", "title", None, None),  # a row with neither value
]

MEMBERSHIP = {
    "photos": ["beach.jpg", "sunset.JPG", "IMG_0001.jpeg", "100%_real.png", "café.jpg", "写真.png", "emoji😀.gif"],
    "videos": ["movie.mp4", "clip.mov", "big_file.mkv"],
    "docs": ["report_2024.pdf", "report%2024.pdf", "readme.md", "notes.txt"],
    "favourites": ["beach.jpg", "movie.mp4", "report_2024.pdf"],
    "empty": [],
}


# extracted text of some entries (UPPER.PDF: extraction failed; the others were never extracted)
TEXTS = {
    "report_2024.pdf": ["Annual Report 2024\nrevenue grew", "Invoice INV-204512\n100% paid"],
    "report%2024.pdf": ["100% sure\ncafé menu"],
    "readme.md": ["# readme\nsee the report"],
    "notes.txt": ["a_b\nline"],
    "empty.txt": [""],
}


def fill(engine) -> None:
    with engine.begin() as conn:
        conn.execute(insert(ENTRIES), CORPUS)
        ids = dict(conn.execute(select(ENTRIES.c.name, ENTRIES.c.id)).all())
        conn.execute(insert(META), [{"entry_id": ids[n], "key": k, "num_value": num, "text_value": txt}
                                    for n, k, num, txt in METADATA])
        for set_name, members in MEMBERSHIP.items():
            made = conn.execute(insert(SETS).values(name=set_name, created_at=NOW, updated_at=NOW))
            set_id = made.inserted_primary_key[0]
            if members:
                conn.execute(insert(MEMBERS), [{"set_id": set_id, "entry_id": ids[n], "added_at": NOW}
                                               for n in members])
    write_extracted_many(engine, [DocumentWrite(ids[n], 1, 1.0, "k", Extracted(
        path=n, format="pdf", pages=[Page(i, t) for i, t in enumerate(pages, 1)], total_pages=len(pages)))
        for n, pages in TEXTS.items()] + [DocumentWrite(ids["UPPER.PDF"], 1, 1.0, "k", Extracted(
            path="UPPER.PDF", format="pdf", error_code=FILTER_FAILED, error="encrypted PDF"))])


# --- the two contexts over the real tables (flows/ will hold the same adapters) ---------------------------------------


class StoreSqlContext:
    def __init__(self, store, now: float = NOW) -> None:
        """``store``: an engine (content prefilters ask its text index), or only a dialect's name."""
        self.engine = None if isinstance(store, str) else store
        self.dialect = store if isinstance(store, str) else store.dialect.name
        self.now = now

    def column(self, name: str):
        return ENTRIES.c[name]

    def member_of(self, set_names: list[str]):
        return exists().where(MEMBERS.c.entry_id == ENTRIES.c.id, MEMBERS.c.set_id == SETS.c.id,
                              SETS.c.name.in_(set_names))

    def metadata_exists(self, key: str, build):
        return exists().where(META.c.entry_id == ENTRIES.c.id, META.c.key == key,
                              build(META.c.num_value, META.c.text_value))

    def computed(self, name: str):
        return computed_field(name).sql()

    def content_prefilter(self, name: str, op: str, value):
        return content_field(name).prefilter(op, value, self.engine)


class StoreEvalContext:
    def __init__(self, conn, now: float = NOW) -> None:
        self.conn, self.now = conn, now

    def member_of(self, entry, set_names: list[str]) -> bool:
        query = (select(MEMBERS.c.entry_id).join(SETS, SETS.c.id == MEMBERS.c.set_id)
                 .where(MEMBERS.c.entry_id == entry["id"], SETS.c.name.in_(set_names)).limit(1))
        return self.conn.execute(query).first() is not None

    def metadata(self, entry, key: str):
        row = self.conn.execute(select(META.c.num_value, META.c.text_value)
                                .where(META.c.entry_id == entry["id"], META.c.key == key)).first()
        if row is None:
            return None
        return row.num_value if row.num_value is not None else row.text_value

    def computed(self, entry, name: str):
        return computed_field(name).value(self.conn, entry)

    def content(self, entry, name: str, op: str, value):
        return content_field(name).match(self.conn, entry, op, value)


class Store:
    def __init__(self, engine) -> None:
        self.engine = engine
        self.dialect = engine.dialect.name
        self.conn = engine.connect()
        self.entries = [dict(r) for r in self.conn.execute(select(ENTRIES)).mappings()]
        self.py = StoreEvalContext(self.conn)
        self.sql = StoreSqlContext(engine)

    def sql_names(self, cond) -> set[str]:
        return set(self.conn.execute(select(ENTRIES.c.name).where(to_sql(cond, self.sql))).scalars())

    def python_names(self, cond) -> set[str]:
        return {e["name"] for e in self.entries if evaluate(cond, e, self.py)}

    def split_names(self, cond) -> set[str]:
        """What the plan engine selects: the SQL part of :func:`split`, then its residual in Python."""
        push, residual = split(cond)
        where = to_sql(push, self.sql) if push is not None else true()
        rows = self.conn.execute(select(ENTRIES).where(where)).mappings()
        return {r["name"] for r in rows if residual is None or evaluate(residual, r, self.py)}


@contextlib.contextmanager
def sql_store(request, tmp_path_factory) -> Iterator[Store]:
    """The corpus in the backend of ``request.param``, for a module-scoped ``store`` fixture."""
    with backend_engine(request, tmp_path_factory, "assay_dsl") as engine:
        fill(engine)
        s = Store(engine)
        yield s
        s.conn.close()
