"""dsl.sql against a real store: known queries give known entries, and SQL agrees with dsl.evaluate on every entry of
every random condition tree (NULL columns, missing metadata, computed fields, not / none / empty groups included).
Trees with content leaves (``text contains``), which SQL only narrows, select through ``split`` (the SQL part, then
the residual in Python) what Python alone selects.

Computed fields (``duplicates``) are worked out by the store's registry (flows.core.conditions, filled by
flows.classify.fields): the contexts here hand them over to it, so the agreement covers the real code."""

from __future__ import annotations

import re

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from sqlalchemy import exists, insert, select, true
from sqlalchemy.dialects import postgresql, sqlite

from dsl.conditions import Compare, Group, Not
from dsl.evaluate import evaluate
from dsl.fields import OPERATORS, field_spec
from dsl.regex import RegexError, check_regex, regex_search
from dsl.sql import Superset, can_push, content_literals, regex_literals, split, to_sql
import flows.classify.fields  # noqa: F401  (installs the classifier's fields: metadata producer, duplicates)
import flows.documents.conditions  # noqa: F401  (installs the text field)
from flows.documents.model import FILTER_FAILED, Extracted, Page
from flows.core.conditions import computed_field, content_field
from store.documents import DocumentWrite, write_extracted_many
from store.models import Entry, MetadataValue, ResourceSet, SetMember
from tests.conftest import BACKENDS, backend_engine

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
    def __init__(self, dialect: str, now: float = NOW) -> None:
        self.dialect, self.now = dialect, now

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
        return content_field(name).prefilter(op, value, self.dialect)


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
        self.sql = StoreSqlContext(self.dialect)

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


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with backend_engine(request, tmp_path_factory, "assay_dsl") as engine:
        fill(engine)
        s = Store(engine)
        yield s
        s.conn.close()


# --- known queries -------------------------------------------------------------------------------------------------


def C(field: str, op: str, value: Any = None, arg: str | None = None) -> Compare:
    return Compare(field=field, op=op, value=value, arg=arg)


def all_(*c) -> Group:
    return Group(type="all", conditions=list(c))


def any_(*c) -> Group:
    return Group(type="any", conditions=list(c))


def none_(*c) -> Group:
    return Group(type="none", conditions=list(c))


DIRS = {"", "home", "user", "Photos", "Videos", "docs", "t", "empty"}  # "" is the root, /
NO_MEDIA = DIRS | {".hidden", "Makefile"}
IMAGES = set(MEMBERSHIP["photos"]) | {"link.jpg"}
HASHED = {"beach.jpg", "café.jpg", "写真.png", "movie.mp4", "report_2024.pdf", "UPPER.PDF"}
T_FILES = {"midnight.txt", "end_of_day.txt", "next_day.txt", "before.txt", "future.txt", "week_old.txt"}

CASES = [
    ("media_type = video and size > 1GB", all_(C("media_type", "=", "video"), C("size", ">", "1GB")),
     {"movie.mp4", "big_file.mkv"}),
    ("size >= 1.5GiB", C("size", ">=", "1.5GiB"), {"big_file.mkv", "movie.mp4", "Videos", "", "home", "user"}),
    ("extension = JPG normalises", C("extension", "=", "JPG"), {"beach.jpg", "sunset.JPG", "café.jpg", "link.jpg"}),
    ("extension in [.png, gif]", C("extension", "in", [".png", "gif"]),
     {"100%_real.png", "写真.png", "emoji😀.gif"}),
    ("name contains % is literal", C("name", "contains", "%"), {"100%_real.png", "report%2024.pdf"}),
    ("name contains _ is literal", C("name", "contains", "_"), {"100%_real.png", "IMG_0001.jpeg", "big_file.mkv",
                                                               "report_2024.pdf", "a_b.txt", "end_of_day.txt",
                                                               "next_day.txt", "week_old.txt"}),
    ("startswith is case-sensitive", C("name", "startswith", "a"), {"archive.tar.gz", "a_b.txt", "aXb.txt"}),
    ("endswith .PDF is case-sensitive", C("name", "endswith", ".PDF"), {"UPPER.PDF"}),
    ("unicode contains", C("name", "contains", "é"), {"café.jpg"}),
    ("glob * crosses /", C("path", "glob", "/home/*.pdf"), {"report_2024.pdf", "report%2024.pdf"}),
    ("glob ? is one character (not one byte)", C("name", "glob", "caf?.jpg"), {"café.jpg"}),
    ("glob ? on CJK", C("name", "glob", "??.png"), {"写真.png"}),
    ("glob class and negation", C("name", "glob", "[!a-z]*.txt"), {"[brackets].txt"}),
    ("glob escaped bracket via class", C("name", "glob", "[[]*"), {"[brackets].txt"}),
    ("glob literal star via class", C("name", "glob", "*[*]*"), {"star*.txt"}),
    ("glob * matches a newline", C("name", "glob", "new*line.txt"), {"new\nline.txt"}),
    ("glob reversed range matches nothing", C("name", "glob", "[z-a]*"), set()),
    ("glob is case-sensitive", C("name", "glob", "*.jpg"), {"beach.jpg", "café.jpg", "link.jpg"}),
    ("regex search", C("name", "matches", r"^report.2024\.pdf$"), {"report_2024.pdf", "report%2024.pdf"}),
    ("regex with backslash in data", C("name", "matches", r"\\"), {"back\\slash.txt"}),
    ("kind = directory", C("kind", "=", "Directory"), DIRS),
    ("mime is NULL: != is true, exactly as not =", C("mime", "!=", "image/jpeg"),
     {e["name"] for e in CORPUS if e["mime"] != "image/jpeg"}),
    ("mime is NULL: not = is true", Not(condition=C("mime", "=", "image/jpeg")),
     {e["name"] for e in CORPUS if e["mime"] != "image/jpeg"}),
    ("media_type != image includes entries of no known kind", C("media_type", "!=", "image"), NAMES - IMAGES),
    ("media_type = other is an extension of no known kind", C("media_type", "=", "other"),
     {e["name"] for e in CORPUS if e["media_type"] in (None, "other")}),
    ("none: no child matches (NULLs included)", none_(C("media_type", "in", ["image", "video", "text"])),
     NO_MEDIA | {"report_2024.pdf", "report%2024.pdf", "archive.tar.gz", "song.mp3", "podcast.ogg", "UPPER.PDF"}),
    ("hash present", C("hash", "glob", "*"), HASHED),
    ("hash =", C("hash", "=", "aa11"), {"beach.jpg", "café.jpg", "写真.png"}),
    ("duplicates > 0: other entries share the hash", C("duplicates", ">", 0),
     {"beach.jpg", "café.jpg", "写真.png", "report_2024.pdf", "UPPER.PDF"}),
    ("duplicates counts the others, not the entry", C("duplicates", "=", 2), {"beach.jpg", "café.jpg", "写真.png"}),
    ("duplicates = 0 is a hashed entry alone", C("duplicates", "=", 0), {"movie.mp4"}),
    ("duplicates between", C("duplicates", "between", [1, 1]), {"report_2024.pdf", "UPPER.PDF"}),
    ("duplicates in", C("duplicates", "in", [0, 2]), {"beach.jpg", "café.jpg", "写真.png", "movie.mp4"}),
    ("a fraction is not rounded to a count", C("duplicates", "in", [0, 1.5]), {"movie.mp4"}),
    ("a fraction compared with a count", C("duplicates", ">", 1.5), {"beach.jpg", "café.jpg", "写真.png"}),
    ("no hash, no duplicates value: < is false", C("duplicates", "<", 5), HASHED),
    ("no hash: duplicates != 0 is true, exactly as not =", C("duplicates", "!=", 0), NAMES - {"movie.mp4"}),
    ("duplicates with others", all_(C("duplicates", ">=", 1), C("media_type", "=", "document")),
     {"report_2024.pdf", "UPPER.PDF"}),
    ("parent is NULL at /", Not(condition=C("parent", "startswith", "/")), {""}),
    ("depth", C("depth", ">", 6), {"c.txt"}),
    ("date-only = is the whole UTC day", all_(C("mtime", "=", "2024-01-01"), C("name", "in", sorted(T_FILES))),
     {"midnight.txt", "end_of_day.txt"}),
    ("date-only != is outside that day", all_(C("mtime", "!=", "2024-01-01"), C("name", "in", sorted(T_FILES))),
     {"next_day.txt", "before.txt", "future.txt", "week_old.txt"}),
    ("< a date is before its first instant", all_(C("mtime", "<", "2024-01-01"), C("name", "in", sorted(T_FILES))),
     {"before.txt"}),
    ("between with a date-only upper bound includes that day",
     all_(C("mtime", "between", ["2023-12-31", "2024-01-01"]), C("name", "in", sorted(T_FILES))),
     {"midnight.txt", "end_of_day.txt", "before.txt"}),
    ("date-time = is an instant", C("mtime", "=", "2024-01-01T23:59:59.5Z"), {"end_of_day.txt"}),
    ("midnight date-time is the date, so the whole day", C("mtime", "=", "2024-01-02T00:00:00Z"), {"next_day.txt"}),
    ("relative time", C("mtime", ">=", "now - 7d"), {"movie.mp4", "future.txt", "week_old.txt", "user"}),
    ("relative between", C("mtime", "between", ["now - 7d", "now"]), {"movie.mp4", "week_old.txt", "user"}),
    ("set = photos", C("set", "=", "photos"), set(MEMBERSHIP["photos"])),
    ("set in [videos, docs]", C("set", "in", ["videos", "docs"]), set(MEMBERSHIP["videos"] + MEMBERSHIP["docs"])),
    ("set != favourites", all_(C("set", "!=", "favourites"), C("set", "=", "photos")),
     set(MEMBERSHIP["photos"]) - {"beach.jpg"}),
    ("unknown and empty sets have no members", C("set", "in", ["empty", "nosuch"]), set()),
    ("metadata number", C("width", ">", 1000), {"beach.jpg", "IMG_0001.jpeg", "movie.mp4"}),
    ("missing metadata: not width > 1000 is true", Not(condition=C("width", ">", 1000)),
     NAMES - {"beach.jpg", "IMG_0001.jpeg", "movie.mp4"}),
    ("missing metadata: width != 800 is true, exactly as not =", C("width", "!=", 800), NAMES - {"sunset.JPG"}),
    ("duration with units", C("duration", "between", ["500ms", "1h"]), {"clip.mov", "song.mp3"}),
    ("metadata text", C("title", "contains", "%"), {"report%2024.pdf"}),
    ("a number stored with its text is a number", C("width", "=", 4000), {"IMG_0001.jpeg"}),
    ("exif text", C("exif.Model", "startswith", "Ca"), {"beach.jpg", "café.jpg"}),
    ("exif mixed in", C("exif.ISO", "in", [100, "auto"]), {"IMG_0001.jpeg", "100%_real.png"}),
    ("exif number vs text value", C("exif.ISO", "=", "100"), set()),
    ("metadata.* key", C("metadata.codec", "in", ["h264", "prores"]), {"movie.mp4", "clip.mov"}),
    ("a number is not text for contains", C("metadata.year", "contains", 99), set()),
    ("metadata text ops", C("metadata.year", "startswith", "MC"), {"podcast.ogg"}),
    ("metadata text ordering by code point", C("exif.Model", ">", "C"), {"beach.jpg", "sunset.JPG", "café.jpg"}),
    ("metadata text ordering, lower case after upper", C("exif.Model", ">", "D"), {"sunset.JPG"}),
    ("a row with neither value is missing", Not(condition=C("title", "glob", "*")),
     NAMES - {"report_2024.pdf", "report%2024.pdf", "readme.md", "song.mp3"}),
    ("empty all is true", all_(), NAMES),
    ("empty any is false", any_(), set()),
    ("empty none is true", none_(), NAMES),
    ("not of an empty any is true", Not(condition=any_()), NAMES),
    ("any", any_(C("name", "=", "Makefile"), C("size", "=", 8000)), {"Makefile", "clip.mov"}),
]


@pytest.mark.parametrize("cond, expected", [pytest.param(c, e, id=i) for i, c, e in CASES])
def test_known_conditions_select_the_expected_entries_in_sql_and_in_python(store, cond, expected):
    assert store.sql_names(cond) == expected
    assert store.python_names(cond) == expected


# --- SQL == Python on random trees ---------------------------------------------------------------------------------

TEXT_POOL = ["", "a", "A", "b", ".jpg", ".pdf", "jpg", "report", "%", "_", "100%", "a_b", "é", "café", "写真",
             "😀", HOME, f"{HOME}/Photos", "Photos", " ", "\n", "*", "[", "'", '"', "\\", "x", "image/jpeg",
             "text/plain", "aa11", "image", ".txt", "line"]
GLOB_POOL = ["*", "*.jpg", "*.JPG", "?", "*/Photos/*", "/home/*", "*_*", "*%*", "[a-c]*", "[!a-c]*", "[^.]*",
             "*[0-9]*", "*.[jp][pn]g", "[]]*", "[z-a]*", "[!z-a]*", "*\\*", "*[*]*", "[[]*", "\\[*", "*\n*",
             "caf?.jpg", "??.png", "*😀*", "*.txt", "**", "[", "a[", "*[!", "*.tar.*", "*[a-]*", "*[-.]*",
             "*[\\]*", "*[%_]*", "image/*", "?*?", ""]
REGEX_POOL = ["^a", r"\.jpg$", "[0-9]+", "é", f"^{HOME}/[^/]+$", "%", "_", "report[_%]2024", "^$", r"\\", r"\[",
              "写", r"\s", "(?i)readme", "a|b", "^[A-Z]", "jpe?g", "/"]
SETS_POOL = ["photos", "videos", "docs", "favourites", "empty", "nosuch"]
TIME_POOL = ["2024-01-01", "2024-01-02", "2023-12-31", "2024-06-15", "2024-01-01T12:00:00Z", "now", "now - 7d",
             "now - 3d", "now + 1h", "now - 1y", DAY0 + DAY - 0.5, NOW - 60]
POOLS: dict[str, list[Any]] = {
    "size": [0, 1, 5, 7, 1500, 1501, 3000, 8000, "1KB", "2GB", "1.5GiB", 10**10 - 1],
    "depth": [0, 1, 2, 3, 4, 5, 8],
    "width": [0, 100, 800, 1920, 3840, 4000, 2.5], "height": [600, 1080], "pages": [0, 3, 12],
    "duration": ["500ms", "180s", "1h", 0.5, 5400, "2h"],
    "kind": ["file", "directory", "symlink", "other"],
    "media_type": ["image", "video", "audio", "document", "text", "other"],
    "extension": [".jpg", "jpg", ".PDF", "", ".gz", ".txt", ".png"],
    "exif.Model": ["Canon EOS", "iPhone", "Café Cam", "C", "D", "i", 100],
    "exif.ISO": [100, "auto", "100", 50, 200], "metadata.codec": ["h264", "prores", "h", 264],
    "metadata.year": [1999, "1999", "MCMXCIX", 2000, "M"],
    "title": ["Annual Report", "readme", "1999", "100% sure", "Ann", "r"], "author": ["Ann", "Émile", "É"],
    "duplicates": [0, 1, 2, 3, -1, 1.5], "hash": ["aa11", "bb22", "cc33", "a", "", "x"],
}
FIELDS = ["path", "name", "extension", "parent", "kind", "size", "mtime", "ctime", "depth", "media_type", "mime",
          "hash", "set", "width", "height", "duration", "pages", "title", "author", "exif.Model", "exif.ISO",
          "metadata.codec", "metadata.year", "duplicates"]


@st.composite
def leaves(draw) -> Compare:
    field = draw(st.sampled_from(FIELDS))
    spec = field_spec(field)
    op = draw(st.sampled_from(OPERATORS if spec.type == "metadata" else spec.operators))
    pool = (GLOB_POOL if op == "glob" else REGEX_POOL if op == "matches" else SETS_POOL if spec.type == "set"
            else TIME_POOL if spec.type == "time" else POOLS.get(field, TEXT_POOL))
    values = st.sampled_from(pool)
    if op == "in":
        value: Any = draw(st.lists(values, min_size=1, max_size=3))
    elif op == "between":
        value = [draw(values), draw(values)]
    else:
        value = draw(values)
    try:
        return Compare(field=field, op=op, value=value)
    except (ValueError, TypeError):
        reject()


conditions = st.recursive(
    leaves(),
    lambda kids: st.one_of(
        st.builds(lambda t, cs: Group(type=t, conditions=cs), st.sampled_from(["all", "any", "none"]),
                  st.lists(kids, max_size=3)),
        st.builds(lambda c: Not(condition=c), kids)),
    max_leaves=8)

EXAMPLES = int(os.environ.get("ASSAY_DSL_EXAMPLES", "300"))

CONTENT_POOL = ["Report", "report", "INV-", "100%", "% s", "a_b", "café", "line", "", "revenue grew", "nothing"]
CONTENT_REGEX_POOL = [r"INV-\d{6}", "(?i)report", "^#", "caf.", r"\d+% (paid|sure)", "^$", "grew$"]


@st.composite
def content_leaves(draw) -> Compare:
    if draw(st.booleans()):
        return Compare(field="text", op="contains", value=draw(st.sampled_from(CONTENT_POOL)))
    return Compare(field="text", op="matches", value=draw(st.sampled_from(CONTENT_REGEX_POOL)))


mixed_conditions = st.recursive(
    st.one_of(leaves(), content_leaves()),
    lambda kids: st.one_of(
        st.builds(lambda t, cs: Group(type=t, conditions=cs), st.sampled_from(["all", "all", "any", "none"]),
                  st.lists(kids, max_size=3)),
        st.builds(lambda c: Not(condition=c), kids)),
    max_leaves=6)


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                        HealthCheck.filter_too_much])
@given(cond=conditions)
def test_sql_and_python_agree_on_every_entry_of_random_trees(store, cond):
    assert store.sql_names(cond) == store.python_names(cond)


@settings(max_examples=EXAMPLES // 3, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                             HealthCheck.filter_too_much])
@given(cond=mixed_conditions)
def test_split_with_content_leaves_selects_what_python_alone_selects(store, cond):
    assert store.split_names(cond) == store.python_names(cond)


# --- split, can_push, parameters -------------------------------------------------------------------------------------

TEXT_LEAF = C("text", "contains", "invoice")
LABEL_LEAF = C("label", "=", "receipt")
SIMILAR_LEAF = C("similarity", ">=", 0.4, arg="a beach")
OPAQUE = Not(condition=SIMILAR_LEAF)  # SQL neither decides nor narrows it (an entry without vectors passes)


def test_can_push_stored_fields_and_labels_but_not_content_or_similarity():
    assert can_push(C("size", ">", 1)) and can_push(C("set", "=", "photos")) and can_push(C("exif.Model", "=", "x"))
    assert can_push(C("width", ">", 1)) and can_push(C("mime", "=", "x")) and can_push(C("duplicates", ">", 0))
    assert can_push(LABEL_LEAF) and can_push(C("label", "in", ["a", "b"])) and can_push(C("label", "!=", "a"))
    assert not can_push(TEXT_LEAF) and not can_push(SIMILAR_LEAF)


def test_split_a_top_level_all_child_by_child():
    a, b = C("size", ">", 10), C("set", "=", "photos")
    cond = all_(a, OPAQUE, b, all_(OPAQUE, C("depth", "<", 3)))
    pushed, rest = split(cond)
    assert pushed == all_(a, b, C("depth", "<", 3))
    assert rest == all_(OPAQUE, OPAQUE)


def test_split_sends_a_single_leaf_alone_not_wrapped():
    assert split(all_(C("size", ">", 10), OPAQUE)) == (C("size", ">", 10), OPAQUE)


def test_split_keeps_any_other_node_whole():
    mixed = any_(C("size", ">", 10), OPAQUE)
    assert split(mixed) == (None, mixed)
    assert split(Not(condition=all_(C("size", ">", 10), TEXT_LEAF))) == \
        (None, Not(condition=all_(C("size", ">", 10), TEXT_LEAF)))
    pure = any_(C("size", ">", 10), C("width", "<", 5))
    assert split(pure) == (pure, None)
    assert split(all_(OPAQUE, OPAQUE)) == (None, all_(OPAQUE, OPAQUE))
    assert split(all_()) == (all_(), None)


def test_split_keeps_content_leaves_for_python_and_narrows_sql_with_their_superset():
    a = C("size", ">", 10)
    cond = all_(a, TEXT_LEAF, all_(OPAQUE, C("depth", "<", 3)))
    pushed, rest = split(cond)
    assert pushed == Superset(all_(a, C("depth", "<", 3), TEXT_LEAF))
    assert rest == all_(TEXT_LEAF, OPAQUE)
    assert split(TEXT_LEAF) == (Superset(TEXT_LEAF), TEXT_LEAF)
    either = any_(a, TEXT_LEAF)  # a superset of each branch: SQL can still narrow
    assert split(either) == (Superset(either), either)
    assert split(any_(TEXT_LEAF, OPAQUE)) == (None, any_(TEXT_LEAF, OPAQUE))
    assert split(SIMILAR_LEAF) == (Superset(SIMILAR_LEAF), SIMILAR_LEAF)  # similarity narrows like text
    assert split(all_(a, LABEL_LEAF, SIMILAR_LEAF)) == (Superset(all_(a, LABEL_LEAF, SIMILAR_LEAF)), SIMILAR_LEAF)
    negated = Not(condition=TEXT_LEAF)  # true for entries without text: nothing to narrow by
    assert split(negated) == (None, negated)
    assert split(none_(TEXT_LEAF)) == (None, none_(TEXT_LEAF))


@pytest.mark.parametrize("pattern, literals", [
    (r"INV-\d{6}", ["INV-"]),
    (r"report_\d+\.pdf", ["report_", ".pdf"]),
    (r"^total:\s*\$\d", ["total:", "$"]),
    ("colou?r", ["colo", "r"]),
    ("ab(c|d)ef", ["ab", "ef"]),
    ("x{2}yz", ["yz"]),
    ("abc{0}", ["ab"]),
    ("[]a]bcd", ["bcd"]),
    ("(?P<n>a)bcd", ["bcd"]),
    (r"\bword\b", ["word"]),
    ("a.b", ["a", "b"]),
    ("invoice|receipt", []),  # alternation at the top: no run is in every match
    ("(?i)Invoice", ["invoice"]),  # case-insensitive as a whole: runs in lower case
    ("(?i)INV-\\d+", ["inv-"]),
    ("(?i)sun dial", ["un dial"]),  # s also matches the long s, which does not lower to s
    ("(?i)Café", ["caf"]),  # only ASCII: other scripts have case orbits str.lower does not follow
    ("(?is)invoice", []),  # other flags change what the characters match
    ("abc(?i)def", []),
    (r"\Qa.b\E", []),
    (r"\x41BC", []),
    (r"\pLabc", []),
    ("a{,3}", []),  # RE2 reads it literally; this reader does not guess
    ("[[:alpha:]]abc", []),
])
def test_regex_literals_are_only_runs_every_match_contains(pattern, literals):
    assert regex_literals(pattern) == literals


@given(pattern=st.text(alphabet="abKs.|()?*+{}[]^$\\1,d-", max_size=10), caseless=st.booleans(), data=st.data())
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.filter_too_much,
                                                                   HealthCheck.too_slow])
def test_a_line_a_regex_matches_contains_every_literal_run_it_requires(pattern, caseless, data):
    pattern = "(?i)" + pattern if caseless else pattern
    try:
        check_regex(pattern)
        re.compile(pattern)
    except (RegexError, re.error):
        reject()
    line = data.draw(st.from_regex(pattern))  # strings holding a match (Python's reading of the pattern)
    if regex_search(pattern, line):  # RE2's reading decides
        runs = regex_literals(pattern)
        assert all(run in (line.lower() if caseless else line) for run in runs), (pattern, line, runs)


def test_content_literals_of_contains_is_the_value():
    assert content_literals("contains", "invoice") == ["invoice"]
    assert content_literals("contains", "") == []
    assert content_literals("matches", r"INV-\d+") == ["INV-"]


def test_to_sql_refuses_fields_sql_cannot_test():
    with pytest.raises(ValueError, match="similarity"):  # SQL only narrows it (its Superset)
        to_sql(SIMILAR_LEAF, StoreSqlContext("sqlite"))
    with pytest.raises(ValueError, match="label"):  # a context without field_clause cannot push labels
        to_sql(LABEL_LEAF, StoreSqlContext("sqlite"))
    with pytest.raises(ValueError):  # a content leaf alone is not decidable in SQL (its Superset is)
        to_sql(TEXT_LEAF, StoreSqlContext("sqlite"))


@pytest.mark.parametrize("dialect", [sqlite.dialect(), postgresql.dialect()], ids=["sqlite", "postgresql"])
def test_values_are_bound_parameters_never_pasted_into_sql(dialect):
    evil = "x'; DROP TABLE entries; --"
    cond = any_(C("name", "=", evil), C("path", "contains", evil), C("name", "glob", evil + "*"),
                C("exif.Model", "=", evil), C("title", "matches", "drop"), C("name", "in", [evil, "y"]))
    ctx = StoreSqlContext(dialect.name)
    compiled = select(ENTRIES.c.id).where(to_sql(cond, ctx)).compile(dialect=dialect)
    sql = str(compiled)
    assert "DROP" not in sql and "drop" not in sql
    assert evil in compiled.params.values()


def test_postgresql_orders_metadata_text_by_code_point():
    ctx = StoreSqlContext("postgresql")
    sql = str(select(ENTRIES.c.id).where(to_sql(C("exif.Model", ">", "C"), ctx)).compile(dialect=postgresql.dialect()))
    assert 'COLLATE "C"' in sql
