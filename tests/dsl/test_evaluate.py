"""dsl.evaluate: conditions over one entry, the explanation tree, and the glob translation shared with dsl.sql.
(SQL and Python agreeing on a real store is tests/dsl/test_sql_*.py.)"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsl.conditions import Compare, Group, Not
from dsl.errors import PlanError
from dsl.evaluate import FieldNotAvailable, condition_text, evaluate, explain, glob_regex
from dsl.regex import regex_search

NOW = 1718452800.0  # 2024-06-15T12:00:00Z
DAY0 = 1704067200.0  # 2024-01-01T00:00:00Z


@dataclass
class DictContext:
    """An EvalContext over plain dicts: sets by name -> entry paths, metadata by path -> {key: value}."""

    now: float = NOW
    sets: dict[str, set[str]] = field(default_factory=dict)
    meta: dict[str, dict[str, Any]] = field(default_factory=dict)
    hashes: dict[str, str] = field(default_factory=dict)  # path -> content hash

    def member_of(self, entry, set_names):
        return any(entry["path"] in self.sets.get(n, ()) for n in set_names)

    def metadata(self, entry, key):
        return self.meta.get(entry["path"], {}).get(key)

    def computed(self, entry, name):  # duplicates: how many other entries have the entry's hash
        if entry["hash"] is None:
            return None
        return sum(1 for other, h in self.hashes.items() if h == entry["hash"] and other != entry["path"])


def entry(path: str = "/p/beach.jpg", **kw) -> dict[str, Any]:
    name = path.rsplit("/", 1)[1]
    base = {"path": path, "parent": path.rsplit("/", 1)[0] or "/", "name": name,
            "extension": "." + name.rsplit(".", 1)[1].lower() if "." in name else "", "kind": "file", "size": 3000,
            "mtime": DAY0 + 3600, "ctime": DAY0 + 3600, "depth": path.count("/"), "media_type": "image",
            "mime": "image/jpeg", "hash": None}
    return base | kw


def C(f: str, op: str, value: Any = None, arg: str | None = None) -> Compare:
    return Compare(field=f, op=op, value=value, arg=arg)


CTX = DictContext(sets={"photos": {"/p/beach.jpg"}}, meta={"/p/beach.jpg": {"width": 1920, "exif.Model": "Canon"}})


@pytest.mark.parametrize("cond, expected", [
    (C("size", ">", "2KB"), True),
    (C("size", "between", ["1KB", "3KB"]), True),
    (C("name", "glob", "*.JPG"), False),
    (C("name", "matches", r"ea.h"), True),
    (C("extension", "=", "JPG"), True),
    (C("hash", "!=", "abc"), True),  # no hash: not equal, as not (hash = abc)
    (Not(condition=C("hash", "=", "abc")), True),  # ... so its negation is true
    (C("mtime", "=", "2024-01-01"), True),
    (C("mtime", ">", "2024-01-01"), True),
    (C("mtime", "<=", "2024-01-01"), False),
    (C("mtime", "=", "2024-01-01T01:00:00Z"), True),
    (C("mtime", ">", "now - 30d"), False),
    (C("set", "=", "photos"), True),
    (C("set", "!=", "photos"), False),
    (C("set", "in", ["videos", "nosuch"]), False),
    (C("width", ">=", 1920), True),
    (C("height", "<", 10), False),
    (Not(condition=C("height", ">", 10)), True),
    (C("exif.Model", "=", "Canon"), True),
    (C("exif.Model", "=", 5), False),
    (Group(type="none", conditions=[C("size", "<", 10), C("kind", "=", "directory")]), True),
    (Group(type="none", conditions=[]), True),
    (Group(type="any", conditions=[]), False),
    (Group(type="all", conditions=[]), True),
])
def test_evaluate_one_entry(cond, expected):
    assert evaluate(cond, entry(), CTX) is expected


@pytest.mark.parametrize("cond", [C("label", "=", "receipt"), C("similarity", ">=", 0.4, arg="a beach")])
def test_registered_fields_on_a_context_that_cannot_test_them_raise_a_plan_error_naming_them(cond):
    with pytest.raises(FieldNotAvailable, match=cond.field) as info:
        evaluate(cond, entry(), CTX)  # CTX has no field(): it cannot ask the semantic index
    assert isinstance(info.value, PlanError)
    assert info.value.code == "FIELD_NOT_AVAILABLE" and info.value.field == cond.field


def test_explain_gives_every_node_its_verdict_and_leaves_their_values():
    cond = Group(type="all", conditions=[
        C("size", ">", "1KB"),
        Not(condition=C("mtime", ">=", "now - 7d")),
        Group(type="any", conditions=[C("set", "in", ["photos", "videos"]), C("width", "<", 100)]),
    ])
    tree = explain(cond, entry(), CTX)
    assert tree["type"] == "all" and tree["passed"] is True and len(tree["children"]) == 3
    size, negated, either = tree["children"]
    assert size == {"text": condition_text(cond.conditions[0]), "type": "compare", "passed": True, "field": "size",
                    "op": ">", "expected": 1000, "seen": 3000}
    assert negated["type"] == "not" and negated["passed"] is True
    mtime = negated["children"][0]
    assert mtime["passed"] is False
    assert mtime["expected"] == "2024-06-08T12:00:00Z"  # now - 7d, resolved
    assert mtime["seen"] == "2024-01-01T01:00:00Z"
    member, width = either["children"]
    assert member["seen"] == ["photos"] and member["passed"] is True
    assert width["seen"] == 1920 and width["passed"] is False
    assert either["passed"] is True


def test_explain_evaluates_every_child_even_after_the_verdict_is_known():
    tree = explain(Group(type="any", conditions=[C("size", ">", 1), C("size", ">", 10**9)]), entry(), CTX)
    assert [c["passed"] for c in tree["children"]] == [True, False]


# --- content fields: the context reads the text, the evaluator keeps the missing-value rules ----------------------


@dataclass
class TextContext(DictContext):
    """A context with extracted text: path -> its lines (None: extraction failed); no key: never extracted."""

    texts: dict[str, list[str] | None] = field(default_factory=dict)

    def content(self, entry, name, op, value):
        assert name == "text"
        if entry["path"] not in self.texts:
            return False, None
        lines = self.texts[entry["path"]]
        if lines is None:
            return False, {"error": "FILTER_FAILED: too large"}
        for i, line in enumerate(lines, 1):
            if (value in line) if op == "contains" else regex_search(value, line):
                return True, {"line": i, "text": line, "page": 1}
        return False, {"lines": len(lines)}


TEXTS = TextContext(texts={"/p/invoice.pdf": ["Invoice INV-204512", "total 40"], "/p/bad.pdf": None})


@pytest.mark.parametrize("path, cond, expected", [
    ("/p/invoice.pdf", C("text", "contains", "Invoice"), True),
    ("/p/invoice.pdf", C("text", "contains", "invoice"), False),  # case-sensitive, like every text comparison
    ("/p/invoice.pdf", C("text", "matches", r"INV-\d{6}"), True),
    ("/p/invoice.pdf", C("text", "contains", "INV-204512 total"), False),  # a value never spans two lines
    ("/p/bad.pdf", C("text", "contains", "x"), False),
    ("/p/bad.pdf", Not(condition=C("text", "contains", "x")), True),  # no text: a missing value
    ("/p/new.pdf", C("text", "matches", "."), False),
    ("/p/new.pdf", Not(condition=C("text", "matches", ".")), True),
])
def test_content_leaves_ask_the_context_and_keep_the_missing_value_rules(path, cond, expected):
    assert evaluate(cond, entry(path), TEXTS) is expected


def test_explain_says_which_line_matched_or_why_none_did():
    def note(path, cond):
        return explain(cond, entry(path), TEXTS)["note"]

    tree = explain(C("text", "matches", r"INV-\d+"), entry("/p/invoice.pdf"), TEXTS)
    assert tree["passed"] is True and tree["seen"] == {"line": 1, "text": "Invoice INV-204512", "page": 1}
    assert tree["note"] == "matched line 1 on page 1: Invoice INV-204512"
    assert note("/p/invoice.pdf", C("text", "contains", "zzz")) == "no line matches (2 lines of extracted text)"
    assert note("/p/bad.pdf", C("text", "contains", "x")) == \
        "no extracted text: extraction failed (FILTER_FAILED: too large)"
    assert note("/p/new.pdf", C("text", "contains", "x")) == "no extracted text (the file has not been extracted)"


def test_a_context_that_cannot_read_text_refuses_content_leaves():
    with pytest.raises(FieldNotAvailable) as info:
        evaluate(C("text", "contains", "invoice"), entry(), CTX)
    assert info.value.field == "text"


HASHED = DictContext(hashes={"/p/a.jpg": "xxh128:1", "/p/b.jpg": "xxh128:1", "/p/c.jpg": "xxh128:2"})


@pytest.mark.parametrize("path, hash_, cond, expected", [
    ("/p/a.jpg", "xxh128:1", C("duplicates", ">", 0), True),
    ("/p/a.jpg", "xxh128:1", C("duplicates", "=", 1), True),  # the others, not the entry itself
    ("/p/c.jpg", "xxh128:2", C("duplicates", "=", 0), True),
    ("/p/c.jpg", "xxh128:2", C("duplicates", ">", 0), False),
    ("/p/d.jpg", None, C("duplicates", "=", 0), False),  # not hashed: no value, so comparisons are false
    ("/p/d.jpg", None, C("duplicates", "<", 10), False),
    ("/p/d.jpg", None, C("duplicates", "!=", 0), True),  # ... and != is true, as not (=)
    ("/p/a.jpg", "xxh128:1", C("duplicates", "between", [1, 3]), True),
])
def test_computed_fields_are_asked_of_the_context_and_missing_values_behave_as_everywhere(path, hash_, cond,
                                                                                         expected):
    assert evaluate(cond, entry(path, hash=hash_), HASHED) is expected


def test_explain_shows_the_computed_value_seen():
    tree = explain(C("duplicates", ">", 0), entry("/p/a.jpg", hash="xxh128:1"), HASHED)
    assert tree["passed"] is True and tree["seen"] == 1 and tree["field"] == "duplicates"
    tree = explain(C("duplicates", ">", 0), entry("/p/d.jpg"), HASHED)
    assert tree["passed"] is False and tree["seen"] is None


def test_explain_of_a_missing_value_shows_none():
    tree = explain(C("height", ">", 10), entry(), CTX)
    assert tree["passed"] is False and tree["seen"] is None


def test_explain_keeps_absolute_times_and_between_lists():
    tree = explain(C("mtime", "between", ["2024-01-01", "now"]), entry(), CTX)
    assert tree["expected"] == ["2024-01-01", "2024-06-15T12:00:00Z"] and tree["passed"] is True


def test_condition_text_is_the_printers_when_there_is_one():
    printer = pytest.importorskip("dsl.printer")
    cond = Group(type="all", conditions=[C("size", ">", "1GiB"), Not(condition=C("name", "glob", "*.tmp"))])
    assert condition_text(cond) == printer.condition_to_text(cond)


# --- globs: one translation for Python, SQLite and PostgreSQL ----------------------------------------------------

ALPHABET = "ab/.*?-!^é\n\\"


@given(pattern=st.text(alphabet=ALPHABET, max_size=6), name=st.text(alphabet="ab/.-!^é\n\\[]*?", max_size=6))
def test_globs_without_classes_match_as_fnmatch_does(pattern, name):
    regex = glob_regex(pattern)
    assert regex_search(regex, name) == fnmatch.fnmatchcase(name, pattern)


@given(pattern=st.text(alphabet="ab-!]" + "[", max_size=7), name=st.text(alphabet="ab-!][", max_size=3))
def test_bracket_classes_match_as_fnmatch_does_apart_from_caret_and_reversed_ranges(pattern, name):
    regex = glob_regex(pattern)
    assert (regex is not None and regex_search(regex, name)) == fnmatch.fnmatchcase(name, pattern)


@pytest.mark.parametrize("pattern, name, matches", [
    ("[^a]*", "ba", True),  # ^ negates as well as ! (fnmatch would take it literally)
    ("[^a]*", "ab", False),
    ("[z-a]", "m", False),  # a reversed range is empty
    ("[!z-a]", "m", True),
    ("[a-c-e]", "-", True),
    ("[\\]x", "\\x", True),  # a backslash in a class is itself
    ("a\\*", "a\\b", True),  # ... and outside one too: globs have no escapes
    ("[[]x", "[x", True),
    ("[*]", "*", True),
    ("[]-]", "]", True),
    ("*", "line\nbreak", True),
    ("?", "\n", True),
    ("x", "x\n", False),  # anchored at the very end, not before a trailing newline
])
def test_glob_edge_cases(pattern, name, matches):
    regex = glob_regex(pattern)
    assert (regex is not None and regex_search(regex, name)) is matches
