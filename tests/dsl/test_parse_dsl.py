"""The plan DSL: statements, their mapping onto the model, and located errors."""

from __future__ import annotations

import pytest

from dsl import Plan, PlanSyntaxError, PlanValidationError, parse_expression, parse_plan_file, parse_plan_text
from dsl.parse import detect_format, parse_dsl

EXAMPLE = '''\
# the DSL example of dsl/parse.py
plan media-library
description "Thumbnail the photos, collect big videos"
mode continuous
source photos watch "~/Photos" into photos recursive=true debounce_ms=500 exclude=["*.tmp", "*.part"]
source papers index "/data/papers" max_depth=3
source favs set favourites
source recent query recent-files
rule big-videos when media_type = video and size > 1GB
  do selection_set big-videos
  do classifier generate_timeline maxWidth=320
rule papers when extension = .pdf and size <= 50MB
  do embed papers chunk_size=800 when size > 1KB

rule tidy when (mtime < now - 365d
                and path contains /drafts/)   # a condition may continue inside parentheses
  do chained stopOnError=true (
    selection_set old,
    selection_set recent operation=remove
  )
rule everything
  do label cat dog threshold=0.5
prefer default_sort=size
'''

BASE = "plan p\nsource s index /data\n"


def test_the_documented_example_reads_into_the_canonical_model():
    plan = parse_dsl(EXAMPLE)
    expected = Plan.from_object({
        "name": "media-library", "description": "Thumbnail the photos, collect big videos", "mode": "continuous",
        "sources": [
            {"name": "photos", "type": "filesystem.watch", "target_set": "photos",
             "config": {"path": "~/Photos", "recursive": True, "debounce_ms": 500, "exclude": ["*.tmp", "*.part"]}},
            {"name": "papers", "type": "filesystem.index", "config": {"path": "/data/papers", "max_depth": 3}},
            {"name": "favs", "type": "selection_set", "config": {"set": "favourites"}},
            {"name": "recent", "type": "query", "config": {"query": "recent-files"}},
        ],
        "rules": [
            {"name": "big-videos", "when": "media_type = video and size > 1GB", "outcomes": [
                {"type": "selection_set", "selectionSetName": "big-videos"},
                {"type": "classifier", "classifierOperation": "generate_timeline", "maxWidth": 320}]},
            {"name": "papers", "when": "extension = .pdf and size <= 50MB", "outcomes": [
                {"type": "embed", "collection": "papers", "chunk_size": 800, "when": "size > 1KB"}]},
            {"name": "tidy", "when": "mtime < now - 365d and path contains /drafts/", "outcomes": [
                {"type": "chained", "stopOnError": True, "outcomes": [
                    {"type": "selection_set", "selectionSetName": "old"},
                    {"type": "selection_set", "selectionSetName": "recent", "operation": "remove"}]}]},
            {"name": "everything", "outcomes": [{"type": "label", "classes": ["cat", "dog"], "threshold": 0.5}]},
        ],
        "preferences": {"default_sort": "size"},
    })
    assert plan == expected


@pytest.mark.parametrize("line, source", [
    ("source a index /x", {"name": "a", "type": "filesystem.index", "config": {"paths": ["/x"]}}),
    ("source a filesystem.index /x /y", {"name": "a", "type": "filesystem.index", "config": {"paths": ["/x", "/y"]}}),
    ('source a watch "/my files" into inbox', {"name": "a", "type": "filesystem.watch", "target_set": "inbox",
                                                "config": {"paths": ["/my files"]}}),
    ("source a index path=/x include_hidden=true follow_symlinks=false",
     {"name": "a", "type": "filesystem.index", "config": {"paths": ["/x"], "include_hidden": True}}),
    ("source a set photos", {"name": "a", "type": "selection_set", "config": {"set": "photos"}}),
    ("source a selection_set photos", {"name": "a", "type": "selection_set", "config": {"set": "photos"}}),
    ("source a query 'recent files'", {"name": "a", "type": "query", "config": {"query": "recent files"}}),
])
def test_a_source_line_gives_type_values_target_set_and_config(line, source):
    plan = parse_dsl(f"plan p\n{line}\n")
    assert plan.sources[0] == Plan.from_object({"name": "p", "sources": [source]}).sources[0]


@pytest.mark.parametrize("line, outcome", [
    ("do selection_set big", {"type": "selection_set", "selectionSetName": "big"}),
    ("do selection_set big remove", {"type": "selection_set", "selectionSetName": "big", "operation": "remove"}),
    ("do classifier", {"type": "classifier"}),
    ("do classifier generate_thumbnail maxWidth=320 quality=80",
     {"type": "classifier", "classifierOperation": "generate_thumbnail", "maxWidth": 320, "quality": 80}),
    ("do embed", {"type": "embed"}),
    ("do embed papers overlap=100 model=\"all-MiniLM-L6-v2\"",
     {"type": "embed", "collection": "papers", "overlap": 100, "model": "all-MiniLM-L6-v2"}),
    ("do label cat 'hot dog' into=metadata", {"type": "label", "classes": ["cat", "hot dog"], "into": "metadata"}),
    ("do label cat hot-dog into=both", {"type": "label", "classes": ["cat", "hot-dog"], "into": "both"}),
    ("do label invoice receipt=\"proof of a payment\" threshold=0.4 collection=papers",
     {"type": "label", "classes": ["invoice", {"name": "receipt", "description": "proof of a payment"}],
      "threshold": 0.4, "collection": "papers"}),
    ("do label classes=[a, {name=b, description=\"bee\"}, {name=c}]",
     {"type": "label", "classes": ["a", {"name": "b", "description": "bee"}, "c"]}),
    ("do label classes=[a, b]", {"type": "label", "classes": ["a", "b"]}),
    ("do map outline window=30", {"type": "map", "strategy": "outline", "window": 30}),
    ("do selection_set x when size > 1", {"type": "selection_set", "selectionSetName": "x", "when": "size > 1"}),
    ("do chained (selection_set a when size > 1, classifier) when kind = file",
     {"type": "chained", "when": "kind = file", "outcomes": [
         {"type": "selection_set", "selectionSetName": "a", "when": "size > 1"}, {"type": "classifier"}]}),
])
def test_a_do_line_fills_the_outcome_from_values_options_and_when(line, outcome):
    plan = parse_dsl(f"{BASE}rule r\n  {line}\n")
    expected = Plan.from_object({"name": "p", "sources": [{"name": "s", "type": "filesystem.index",
                                                           "config": {"path": "/data"}}],
                                 "rules": [{"name": "r", "outcomes": [outcome]}]})
    assert plan.rules[0].outcomes == expected.rules[0].outcomes


def test_a_rule_without_when_matches_everything():
    plan = parse_dsl(f"{BASE}rule all-of-it\n  do selection_set x\n")
    assert plan.rules[0].when == parse_expression("all()")


@pytest.mark.parametrize("line, preferences", [
    ("prefer a=1 b=1.5 c=true d=false e=null f=word g=\"two words\"",
     {"a": 1, "b": 1.5, "c": True, "d": False, "e": None, "f": "word", "g": "two words"}),
    ("prefer list=[1, x, \"y\"] map={k=v, n=[1]}", {"list": [1, "x", "y"], "map": {"k": "v", "n": [1]}}),
    ('prefer "odd key"=-3 "true"="true"', {"odd key": -3, "true": "true"}),
])
def test_prefer_reads_typed_option_values(line, preferences):
    assert parse_dsl(f"{BASE}{line}\n").preferences == preferences


def test_comments_blank_lines_and_keywords_as_names_are_accepted():
    plan = parse_dsl("\n# head\nplan when   # the plan is named 'when'\n\nsource rule index /x\n"
                     "rule do when name = all\n  do selection_set \"when\"\n")
    assert (plan.name, plan.sources[0].name, plan.rules[0].name) == ("when", "rule", "do")
    assert plan.rules[0].outcomes[0].selectionSetName == "when"


@pytest.mark.parametrize("text, label, line, column", [
    ("rule x\n", "a plan starts with 'plan NAME'", 1, 1),
    ("plan\n", "missing plan name", 1, 5),
    (f"{BASE}rule\n", "missing rule name", 3, 5),
    (f"{BASE}rule r x = y\n", "after the rule name, write 'when'", 3, 8),
    (f"{BASE}sorce s index /a\n", "unknown statement", 3, 1),
    ("plan p\ndo selection_set x\n", "'do' belongs to a rule", 2, 1),
    (f"{BASE}rule r when size >\n  do selection_set x\n", "missing value after the operator", 3, 19),
    (f"{BASE}rule r when size is 5\n", "unknown operator", 3, 18),
    (f"{BASE}rule r when (size > 1\n  do selection_set x\n", "unclosed parenthesis", 4, 3),
    (f"{BASE}rule r\n  do chained (selection_set a\n", "unclosed parenthesis", 4, 30),
    (f"{BASE}rule r when size > 1 name = x\n", "'and' or 'or' is missing", 3, 22),
    (f"{BASE}prefer a=\n", "missing value after '='", 3, 10),
    (f"{BASE}rule r\n  do\n", "missing outcome type", 4, 5),
    (f"{BASE}rule r when name = \"abc\n", "unclosed quote", 3, 20),
])
def test_a_dsl_syntax_error_has_a_label_line_column_and_caret(text, label, line, column):
    with pytest.raises(PlanSyntaxError) as err:
        parse_dsl(text)
    problem = err.value.problems[0]
    assert label in problem.message and "expected" in problem.message
    assert (problem.line, problem.column) == (line, column)
    caret_line = problem.context.splitlines()[-1]
    assert caret_line.index("^") - 4 == column - 1


@pytest.mark.parametrize("text, fragment, line, column", [
    (f"{BASE}rule r when sise > 1MB\n", "unknown field 'sise'", 3, 13),
    (f"{BASE}rule r when size > 1XB\n", "unknown size unit 'XB'", 3, 20),
    (f"{BASE}rule r when name matches \"(\"\n", "not a valid regular expression", 3, 26),
    (f"{BASE}rule r\n  do selectionset x\n", "unknown outcome type 'selectionset'", 4, 6),
    ("plan p\nsource s indx /a\n", "unknown source type 'indx'; use index, watch, set or query", 2, 10),
    ("plan p\nsource s index /a recursve=true\n", "unknown key 'recursve'; accepted: paths, recursive", 2, 19),
    ("plan p\nsource s index /a max_depth=deep\n", "valid integer", 2, 19),
    (f"{BASE}rule r\n  do selection_set x operation=move\n", "'add' or 'remove'", 4, 22),
    (f"{BASE}rule r\n  do classifier thumbnails\n", "generate_thumbnail", 4, 17),
    (f"{BASE}rule r\n  do embed a b\n", "an embed outcome takes 1 value(s) (collection)", 4, 14),
    (f"{BASE}rule r\n  do selection_set x colour=red\n", "unknown key 'colour'", 4, 22),
    ("plan p\nmode sometimes\nsource s index /a\n", "'oneshot' or 'continuous'", 2, 6),
    (f"{BASE}rule r\nrule r\n", "two rules are named 'r'", 1, 6),
    ("plan p\nrule r\n", "a plan needs at least one source", 1, 6),
    (f"{BASE}prefer a=1 a=2\n", "'a' is given twice", 3, 12),
    ("plan p\nsource s set a b\n", "takes one set name", 2, 16),
    (f"{BASE}rule r\n  do label a treshold=0.5\n", "'treshold' is not an option of a label outcome", 4, 14),
    (f"{BASE}rule r\n  do label a b=bee\n", 'written NAME="what it means", the description in quotes', 4, 14),
    (f"{BASE}rule r\n  do label a a=\"again\"\n", "class 'a' is given twice", 4, 6),
    (f"{BASE}rule r\n  do label a 'b c' into=sets\n", "class 'b c' is not a valid resource-set name", 4, 6),
    (f"{BASE}rule r\n  do label a b=\"x\" classes=[c]\n", "'classes' is given twice", 4, 20),
])
def test_a_semantic_error_in_dsl_text_carries_the_position_of_its_token(text, fragment, line, column):
    with pytest.raises(PlanValidationError) as err:
        parse_dsl(text)
    problem = err.value.problems[0]
    assert fragment in problem.message
    assert (problem.line, problem.column) == (line, column)
    assert problem.context and "^" in problem.context
    assert f"line {line}, column {column}" in str(err.value)


def test_every_semantic_error_of_a_dsl_plan_is_listed():
    with pytest.raises(PlanValidationError) as err:
        parse_dsl(f"{BASE}rule a when sise > 1\nrule b when size > 1XB\n  do frobnicate\n")
    assert [(p.line, p.column) for p in err.value.problems] == [(3, 13), (4, 20), (5, 6)]


@pytest.mark.parametrize("text, fmt", [
    ("plan p\nsource s index /a\n", "dsl"),
    ("# comment\n\nplan p\n", "dsl"),
    ('plan "p"\n', "dsl"),
    ("name: p\nsources: []\n", "yaml"),
    ("plan: x\n", "yaml"),
    ('  {"name": "p"}', "json"),
])
def test_the_format_is_detected_from_the_first_statement(text, fmt):
    assert detect_format(text) == fmt


def test_auto_format_and_plan_files_read_dsl(tmp_path):
    path = tmp_path / "media.plan"
    path.write_text(EXAMPLE)
    assert parse_plan_text(EXAMPLE) == parse_dsl(EXAMPLE) == parse_plan_file(path)


def test_an_error_in_a_plan_file_names_the_file(tmp_path):
    path = tmp_path / "bad.plan"
    path.write_text("plan p\nsource s index /a\nrule r when sise > 1\n")
    with pytest.raises(PlanValidationError) as err:
        parse_plan_file(path)
    assert str(path) in str(err.value) and "line 3, column 13" in str(err.value)
