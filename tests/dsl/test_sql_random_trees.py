"""dsl.sql against a real store (tests/dsl/sql_store.py): SQL agrees with dsl.evaluate on every entry of every
random condition tree (NULL columns, missing metadata, computed fields, not / none / empty groups included). Trees
with content leaves (``text contains``), which SQL only narrows, select through ``split`` (the SQL part, then the
residual in Python) what Python alone selects."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from dsl.conditions import Compare, Group, Not
from dsl.fields import OPERATORS, field_spec
from tests.conftest import BACKENDS
from tests.dsl.sql_store import DAY, DAY0, HOME, NOW, sql_store


@pytest.fixture(scope="module", params=BACKENDS)
def store(request, tmp_path_factory):
    with sql_store(request, tmp_path_factory) as s:
        yield s


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
