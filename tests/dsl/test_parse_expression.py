"""Condition expressions: the syntax shared by YAML ``when:`` strings and the DSL."""

from __future__ import annotations

import pytest

from dsl import PlanError, PlanSyntaxError, PlanValidationError, parse_expression
from dsl.conditions import Compare, Group, Not


def C(field, op, value, arg=None):
    return Compare(field=field, op=op, value=value, arg=arg)


def All(*cs):
    return Group(type="all", conditions=list(cs))


def Any(*cs):
    return Group(type="any", conditions=list(cs))


A, B, D = C("name", "=", "a"), C("name", "=", "b"), C("name", "=", "d")


@pytest.mark.parametrize("text, expected", [
    ("size > 10MB", C("size", ">", 10_000_000)),
    ("size >= 1.5GiB", C("size", ">=", int(1.5 * 1024**3))),
    ("size <= 2048", C("size", "<=", 2048)),
    ("duration > 500ms", C("duration", ">", 0.5)),
    ("duration < 7d", C("duration", "<", 7 * 86400.0)),
    ("mtime > 2024-01-01", C("mtime", ">", "2024-01-01")),
    ("mtime < 2024-01-01T12:30:00Z", C("mtime", "<", "2024-01-01T12:30:00Z")),
    ("mtime > now - 7d", C("mtime", ">", "now - 7d")),
    ("mtime > now-7d", C("mtime", ">", "now - 7d")),
    ("ctime <= now + 1h", C("ctime", "<=", "now + 1h")),
    ("mtime = now", C("mtime", "=", "now")),
    ("media_type = video", C("media_type", "=", "video")),
    ("media_type == VIDEO", C("media_type", "=", "video")),
    ("extension = .pdf", C("extension", "=", ".pdf")),
    ("extension = PDF", C("extension", "=", ".pdf")),
    ("mime = image/jpeg", C("mime", "=", "image/jpeg")),
    ("set = photos", C("set", "=", "photos")),
    ("path startswith /tmp/x", C("path", "startswith", "/tmp/x")),
    ("path startswith ~/Photos", C("path", "startswith", "~/Photos")),
    ('path contains "/my photos/"', C("path", "contains", "/my photos/")),
    ("name endswith '.tar.gz'", C("name", "endswith", ".tar.gz")),
    ("name glob *.tmp", C("name", "glob", "*.tmp")),
    (r'name matches "report_\d{4}\.pdf"', C("name", "matches", r"report_\d{4}\.pdf")),
    (r'name matches "\\(copy\\)"', C("name", "matches", r"\(copy\)")),
    ('title = "say \\"hi\\""', C("title", "=", 'say "hi"')),
    ("name = 007", C("name", "=", "007")),
    ("width >= 1920", C("width", ">=", 1920)),
    ("width < 1.5", C("width", "<", 1.5)),
    ("depth != 3", C("depth", "!=", 3)),
    ("exif.Model startswith Canon", C("exif.Model", "startswith", "Canon")),
    ("exif.ISO = 100", C("exif.ISO", "=", 100)),
    ('exif.ISO = "100"', C("exif.ISO", "=", "100")),
    ("metadata.codec = h264", C("metadata.codec", "=", "h264")),
    ('"metadata.two words" = x', C("metadata.two words", "=", "x")),
    ('similarity("a beach at sunset") >= 0.4', C("similarity", ">=", 0.4, arg="a beach at sunset")),
    ("text contains invoice", C("text", "contains", "invoice")),
    ("label = cat", C("label", "=", "cat")),
    ("extension in [.pdf, .epub, md]", C("extension", "in", [".pdf", ".epub", ".md"])),
    ("media_type in [image, video,]", C("media_type", "in", ["image", "video"])),
    ("size between 1MB and 10MB", C("size", "between", [10**6, 10**7])),
    ("mtime between now - 30d and now", C("mtime", "between", ["now - 30d", "now"])),
    ("extension not in [.part, .tmp]", Not(condition=C("extension", "in", [".part", ".tmp"]))),
    ("name not contains draft", Not(condition=C("name", "contains", "draft"))),
    ("size not between 1KB and 2KB", Not(condition=C("size", "between", [1000, 2000]))),
    ("kind == file", C("kind", "=", "file")),
    ("size <> 0", C("size", "!=", 0)),
    ("name like *.md", C("name", "glob", "*.md")),
])
def test_a_comparison_reads_its_field_operator_and_value_with_units(text, expected):
    assert parse_expression(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("name = a and name = b and name = d", All(A, B, D)),
    ("name = a or name = b or name = d", Any(A, B, D)),
    ("name = a or name = b and name = d", Any(A, All(B, D))),
    ("name = a and name = b or name = d", Any(All(A, B), D)),
    ("(name = a or name = b) and name = d", All(Any(A, B), D)),
    ("name = a and (name = b and name = d)", All(A, All(B, D))),
    ("not name = a and name = b", All(Not(condition=A), B)),
    ("not (name = a and name = b)", Not(condition=All(A, B))),
    ("not not name = a", Not(condition=Not(condition=A))),
    ("((name = a))", A),
    ("all(name = a, name = b)", All(A, B)),
    ("any(name = a)", Any(A)),
    ("none(name = a, name = b)", Group(type="none", conditions=[A, B])),
    ("all()", All()),
    ("any()", Any()),
    ("none()", Group(type="none")),
    ("true", All()),
    ("false", Any()),
    ("all(name = a and name = b, name = d)", All(All(A, B), D)),
    ("name = a and\n   name = b", All(A, B)),
])
def test_and_or_not_and_groups_nest_by_precedence_without_flattening_parentheses(text, expected):
    assert parse_expression(text) == expected


@pytest.mark.parametrize("text", ["set = all", "label = none", "name = not", "name = and", "name = when"])
def test_keywords_are_plain_words_where_a_value_is_expected(text):
    cond = parse_expression(text)
    assert cond.value == text.split(" = ")[1]


@pytest.mark.parametrize("text, label, column", [
    ("size >", "missing value after the operator", 7),
    ("x = y and size >", "missing value after the operator", 17),
    ("size is 5", "unknown operator", 6),
    ("size => 5", "unknown operator", 7),
    ("size", "missing operator and value", 5),
    ("(size > 1", "unclosed parenthesis", 10),
    ("all(size > 1, size < 5", "unclosed parenthesis", 23),
    ("extension in [.pdf, .md", "unclosed list", 24),
    ('name = "abc', "unclosed quote", 8),
    ("size > 1)", "unbalanced parenthesis", 9),
    ("", "missing condition", 1),
    ("size > 1 and", "missing condition", 13),
    ("size > 1 name = x", "'and' or 'or' is missing", 10),
    ("size between 1MB 5MB", "'between' needs two values joined by 'and'", 18),
    ("similarity > 0.5", "similarity takes a quoted phrase", 12),
])
def test_a_syntax_error_names_the_mistake_the_column_and_what_is_expected(text, label, column):
    with pytest.raises(PlanSyntaxError) as err:
        parse_expression(text)
    problem = err.value.problems[0]
    assert label in problem.message
    assert "expected" in problem.message
    assert (problem.line, problem.column) == (1, column)
    assert problem.context.splitlines()[-1].index("^") - 4 == column - 1
    assert f"column {column}" in err.value.message


@pytest.mark.parametrize("text, fragment, column", [
    ("sise > 1MB", "unknown field 'sise'", 1),
    ("size > 10XB", "unknown size unit 'XB'", 8),
    ("size > 1 and duration > 3parsecs", "unknown duration unit", 25),
    ("media_type = movie", "is not one of: image, video", 14),
    ('name matches "("', "not a valid regular expression", 14),
    ("media_type contains vid", "operator 'contains' does not apply", 12),
    ("size between 10MB and 1MB", "smaller value first", 14),
    ("similarity(\"x\") > 2", "between 0 and 1", 19),
    ("mtime > yesterday", "is not a time", 9),
    ("set = 'two words'", "not a resource-set name", 7),
])
def test_a_wrong_field_unit_value_or_regex_is_reported_at_its_own_token(text, fragment, column):
    with pytest.raises(PlanValidationError) as err:
        parse_expression(text)
    problem = err.value.problems[0]
    assert fragment in problem.message
    assert problem.column == column


def test_every_wrong_comparison_in_an_expression_is_reported():
    with pytest.raises(PlanValidationError) as err:
        parse_expression("sise > 1 and size > 1XB")
    assert [p.column for p in err.value.problems] == [1, 21]


def test_an_error_in_a_multi_line_expression_names_its_line():
    with pytest.raises(PlanError) as err:
        parse_expression("size > 1 and\nsise > 2")
    assert (err.value.problems[0].line, err.value.problems[0].column) == (2, 1)


def test_expression_text_is_what_a_string_condition_means_in_the_model():
    from dsl.model import Rule

    rule = Rule.model_validate({"name": "r", "when": "size > 1GB and media_type = video"})
    assert rule.when == All(C("size", ">", 10**9), C("media_type", "=", "video"))
