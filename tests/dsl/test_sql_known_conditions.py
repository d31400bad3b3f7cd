"""dsl.sql against a real store (tests/dsl/sql_store.py): known conditions select the entries they are known to
select, in SQL and in Python alike (NULL columns, missing metadata, computed fields, sets, times, globs, regexes,
not / none / empty groups)."""

from __future__ import annotations

import pytest

from dsl.conditions import Not
from tests.conftest import BACKENDS
from tests.dsl.sql_conditions import C, all_, any_, none_
from tests.dsl.sql_store import CORPUS, MEMBERSHIP, NAMES, sql_store


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with sql_store(request, tmp_path_factory) as s:
        yield s


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
