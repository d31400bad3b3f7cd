"""One set of validation rules in every tool, through an in-process MCP client: a range whose minimum is above its
maximum is refused wherever a range is taken; saved queries are checked like resource-search (paths inside the roots,
valid names); hostile plan text is a located plan error in plan-validate; a catastrophic regular expression is
answered."""

from __future__ import annotations

import pytest

from tests.conftest import ToolFailed, call, index_sync


@pytest.fixture
async def home(client, app, tree):
    index_sync(app, tree)
    await call(client, "resource-set-create", {"name": "home"})
    paths = [str(tree / "Photos" / n) for n in ("notes.txt", "photo.jpg")]
    await call(client, "resource-set-modify", {"name": "home", "operation": "add", "paths": paths})
    return tree


@pytest.mark.parametrize("tool, args, low, high", [
    ("resource-time-range", {"name": "home", "field": "mtime", "min": "2024-02-01", "max": "2024-01-01"},
     "min", "max"),
    ("resource-metric-range", {"name": "home", "metric": "size", "min": 10, "max": 5}, "min", "max"),
    ("resource-search", {"name": "home", "min_size": 10, "max_size": 5}, "min_size", "max_size"),
    ("resource-search", {"name": "home", "min_mtime": "2024-02-01", "max_mtime": "2024-01-01"},
     "min_mtime", "max_mtime"),
    ("list-jobs", {"minProgress": 60, "maxProgress": 40}, "minProgress", "maxProgress"),
    ("query-create", {"name": "q", "query": {"min_size": 10, "max_size": 5}}, "query.min_size", "query.max_size"),
])
async def test_a_range_with_min_above_max_is_refused_by_every_tool_that_takes_one(client, home, tool, args, low,
                                                                                  high):
    with pytest.raises(ToolFailed) as caught:
        await call(client, tool, args)
    text = str(caught.value)
    assert text.startswith("INVALID_PARAMS:") and f"{low} (" in text and f" {high} (" in text
    assert "nothing can match" in text


@pytest.mark.parametrize("tool, args, field", [
    ("resource-search", {"name": "home", "extension": []}, "extension"),
    ("query-create", {"name": "q", "query": {"extension": []}}, "query.extension"),
])
async def test_an_empty_list_of_extensions_is_refused_rather_than_matching_nothing(client, home, tool, args, field):
    with pytest.raises(ToolFailed, match=f"INVALID_PARAMS: {field} is an empty list, which matches nothing"):
        await call(client, tool, args)


async def test_equal_bounds_are_a_range_of_one_value_not_an_error(client, home):
    res = await call(client, "resource-search", {"name": "home", "min_size": 10, "max_size": 10})
    assert [e["name"] for e in res["entries"]] == ["notes.txt"]


@pytest.mark.parametrize("key", ["path_prefix", "parent"])
async def test_saved_query_paths_must_lie_inside_the_roots_like_every_tool_path(client, home, key):
    with pytest.raises(ToolFailed, match="PATH_TRAVERSAL_DETECTED: query.%s /etc is outside the allowed roots" % key):
        await call(client, "query-create", {"name": "q", "query": {key: "/etc"}})
    await call(client, "query-create", {"name": "q", "query": {}})
    with pytest.raises(ToolFailed, match="outside the allowed roots"):
        await call(client, "query-update", {"name": "q", "query": {key: str(home / ".." / ".." / "..")}})


async def test_saved_query_paths_inside_the_roots_are_stored_canonical(client, home):
    made = await call(client, "query-create", {"name": "photos", "query": {
        "path_prefix": str(home / "Photos" / "vacation" / ".." ) + "/", "parent": str(home / "Photos" / ".")}})
    assert made["query"] == {"path_prefix": str(home / "Photos") + "/", "parent": str(home / "Photos")}
    res = await call(client, "query-execute", {"name": "photos"})
    assert sorted(e["name"] for e in res["entries"]) == ["notes.txt", "photo.jpg", "vacation"]


@pytest.mark.parametrize("name", ["two words", "../x", ""])
async def test_saved_query_names_follow_the_rule_of_set_names(client, home, name):
    with pytest.raises(ToolFailed, match="INVALID_PARAMS: name .* is not a valid query name"):
        await call(client, "query-create", {"name": name, "query": {}})


@pytest.mark.parametrize("when, column", [
    ("(" * 3000 + "size > 1" + ")" * 3000, 13 + 64),
    ("not " * 5000 + "size > 1", 13 + 4 * 64),
    ("size > " + "9" * 5000, 13 + 7),
])
async def test_hostile_plan_text_is_a_located_problem_in_plan_validate(client, home, when, column):
    res = await call(client, "plan-validate", {"text": f"plan p\nsource s index {home}\nrule r when {when}\n"})
    assert res["valid"] is False
    problem = res["problems"][0]
    assert (problem["line"], problem["column"]) == (3, column)
    assert "at most" in problem["message"]


async def test_regex_syntax_re2_lacks_is_refused_naming_re2(client, home):
    with pytest.raises(ToolFailed) as caught:
        await call(client, "resource-fuzzy-match", {"name": "home", "field": "name", "pattern": r"(\w)\1",
                                                    "mode": "regex"})
    assert "backreferences are not supported" in str(caught.value) and "RE2 syntax" in str(caught.value)
    res = await call(client, "plan-validate", {"text": f"plan p\nsource s index {home}\n"
                                                       "rule r when name matches \"(?<=x)y\"\n"})
    assert "lookahead and lookbehind are not supported" in res["problems"][0]["message"]


@pytest.mark.parametrize("outcome, column, fragment", [
    ("classifier all maxWidth=0", 21, "a whole number of pixels from 1 to 8192"),
    ("classifier all quality=101", 21, "a whole number from 1 to 100"),
    ("classifier thumbs", 17, "'generate_thumbnail', 'generate_timeline', 'extract_metadata' or 'all'"),
])
async def test_bad_classifier_outcome_values_are_located_with_what_is_accepted(client, home, outcome, column,
                                                                              fragment):
    res = await call(client, "plan-validate", {"text": f"plan p\nsource s index {home}\nrule r\n  do {outcome}\n"})
    assert res["valid"] is False
    (problem,) = res["problems"]
    assert (problem["line"], problem["column"]) == (4, column) and fragment in problem["message"]


async def test_bad_classifier_values_in_a_plan_object_name_their_json_path(client, home):
    with pytest.raises(ToolFailed) as caught:
        await call(client, "plan-create", {"name": "p", "sources": [
            {"name": "s", "type": "filesystem.index", "config": {"path": str(home)}}],
            "outcomes": [{"type": "chained", "outcomes": [{"type": "classifier", "maxHeight": 0}]}]})
    assert "outcomes[0].outcomes[0].maxHeight" in str(caught.value) and "from 1 to 8192" in str(caught.value)


async def test_conditions_on_classifier_fields_validate_now_the_classifier_is_installed(client, home):
    when = 'width > 3000 and duration > 10min and pages >= 20 and exif.Model = "X-T4" and duplicates > 0 ' \
           'and metadata.video_codec = h264 and hash = "xxh128:' + "0" * 32 + '"'
    res = await call(client, "plan-validate", {"text": f"plan p\nsource s index {home}\nrule r when {when}\n"})
    assert res["valid"] is True, res["problems"]
