"""Tool errors: readable text for the model (the code and the whole message), reference 000's error object as JSON in
a second text item, and no structured content (a client checks that against the tool's output schema)."""

from __future__ import annotations

import json

import pytest
from mcp.shared.exceptions import MCPError

from tests.conftest import call, index_sync


async def error_of(client, tool: str, args: dict) -> tuple[str, dict]:
    result = await client.call_tool(tool, args)
    assert result.is_error
    assert result.structured_content is None
    text, detail = result.content[0].text, json.loads(result.content[1].text)
    assert text == f"{detail['error']['data']['type']}: {detail['error']['data']['reason']}"
    return text, detail["error"]


async def test_a_refused_call_carries_the_reference_error_object_as_json_text(client):
    text, error = await error_of(client, "resource-set-get", {"name": "nope"})
    assert text.startswith("NOT_FOUND:") and "nope" in text
    assert error["code"] == -32602 and error["message"] == "Invalid params"
    assert error["data"]["field"] == "name" and "nope" in error["data"]["reason"]
    assert error["data"]["type"] == "NOT_FOUND"


async def test_an_error_result_has_no_structured_content_for_the_output_schema_to_reject(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    assert tools["resource-set-get"].output_schema is not None
    result = await client.call_tool("resource-set-get", {"name": "nope"})
    assert result.is_error and result.structured_content is None


async def test_a_plan_error_lists_its_problems_in_the_error_object(client, tree):
    plan = f"plan p\nsource s index {tree}\nrule r when sise > 1"
    text, error = await error_of(client, "plan-create", {"text": plan})
    assert text.startswith("PLAN_VALIDATION_ERROR:") and "sise" in text
    assert error["data"]["problems"][0]["line"] == 3


async def test_a_value_outside_the_allowed_ones_names_the_parameter_the_choices_and_what_was_sent(client, app, tree):
    index_sync(app, tree)
    text, error = await error_of(client, "navigate", {"path": str(tree), "sort": "colour"})
    assert text == ("INVALID_PARAMS: navigate: parameter 'sort': input should be 'name', 'size' or 'mtime' "
                    "(got \"colour\")")
    assert error["data"]["field"] == "sort"


async def test_a_missing_parameter_is_named(client):
    text, error = await error_of(client, "inspect", {})
    assert text == "INVALID_PARAMS: inspect: parameter 'path' is required"
    assert error["code"] == -32602 and error["data"]["field"] == "path"


async def test_an_out_of_range_number_says_the_bound(client, app, tree):
    text, _ = await error_of(client, "navigate", {"path": str(tree), "limit": 0})
    assert "parameter 'limit': input should be greater than or equal to 1 (got 0)" in text


async def test_a_misspelt_parameter_is_refused_with_the_accepted_ones(client, app, tree):
    text, error = await error_of(client, "navigate", {"path": str(tree), "sorted": "size"})
    assert text == "INVALID_PARAMS: navigate: unknown parameter(s) 'sorted'; accepted: path, limit, offset, sort, desc"
    assert error["message"] == "Invalid params"


@pytest.mark.parametrize("tool, args, said", [
    ("move-files", {"moves": ["x"]}, "parameter 'moves[0]': input should be an object (got \"x\")"),
    ("move-files", {"moves": [{"from": "/a"}]}, "parameter 'moves[0].to' is required"),
    ("job-progress", {"jobId": [1]}, "parameter 'jobId': input should be a string or a whole number (got [1])"),
    ("resource-time-range", {"name": "s", "field": "mtime", "min": {}},
     "parameter 'min': input should be a string or a number (got {})"),
    ("query-create", {"name": "q", "query": "x"}, "parameter 'query': input should be an object (got \"x\")"),
    ("rename-files", {"renames": []}, "parameter 'renames': input should have at least 1 item(s) (got [])"),
    ("move-files", {"moves": [{"from": "/a", "to": "/b", "too": "/c"}]},
     "parameter 'moves[0].too': unknown key here (got \"/c\")"),
])
async def test_argument_errors_speak_json_and_never_name_internal_types(client, tool, args, said):
    text, _ = await error_of(client, tool, args)
    assert said in text
    for internal in ("PathOp", "instance of", "dictionary", ".str", ".int", ".float", "function-", "List "):
        assert internal not in text


@pytest.mark.parametrize("args", [{"desc": "true", "limit": "2"}, {"desc": True, "limit": 2},
                                  {"desc": "true", "limit": "2", "offset": "0"}])
async def test_numbers_and_booleans_may_be_strings_spelt_as_json_spells_them(client, app, tree, args):
    index_sync(app, tree)
    page = await call(client, "navigate", {"path": str(tree), "sort": "name", **args})
    assert [e["name"] for e in page["entries"]] == ["empty", "docs"] and page["limit"] == 2


@pytest.mark.parametrize("name, value, wanted", [
    ("desc", "yes", "true or false"), ("desc", "1", "true or false"), ("desc", 1, "true or false"),
    ("desc", "True", "true or false"), ("limit", "ten", "a whole number"), ("limit", True, "a whole number"),
    ("limit", "10 ", "a whole number"), ("limit", "0x10", "a whole number"), ("limit", "1" * 5000, "a whole number"),
])
async def test_other_strings_for_numbers_and_booleans_are_refused_with_the_rule(client, app, tree, name, value,
                                                                                wanted):
    index_sync(app, tree)
    text, error = await error_of(client, "navigate", {"path": str(tree), name: value})
    assert f"parameter '{name}': input should be {wanted}" in text and "as JSON writes the value" in text
    assert error["data"]["field"] == name


async def test_a_json_number_string_for_a_float_parameter_is_read_as_json_reads_it(client, tree):
    done = await call(client, "index", {"root": str(tree), "async": "false", "maxAge": "1e3"})
    assert done["status"] == "completed" and done["files"] == 10
    text, _ = await error_of(client, "index", {"root": str(tree), "async": "no"})
    assert "parameter 'async': input should be true or false" in text


async def test_an_unknown_tool_is_reference_004s_not_found_error(client):
    # the error a caller also gets for a tool its permissions hide (tests/mcp_server/guard): the two read alike
    with pytest.raises(MCPError) as raised:
        await client.call_tool("navigat", {"path": "/"})
    assert raised.value.code == -32002
    assert raised.value.message == "unknown tool 'navigat'; tools/list lists the tools you may call"


async def test_a_crash_is_an_internal_error_in_the_same_shape_that_tells_nothing_of_the_crash(app):
    from mcp import Client

    from mcp_server.app import AssayServer
    from mcp_server.tools.common import READ_ONLY, ToolSet, tool

    tools = ToolSet()

    @tool(tools, "crash", READ_ONLY)
    def crash() -> dict:
        """A tool that fails in a way nobody foresaw."""
        raise RuntimeError("secret detail of the crash")

    async with Client(AssayServer(app, tools)) as client:
        text, error = await error_of(client, "crash", {})
    assert text == "INTERNAL_ERROR: crash failed unexpectedly; the server's log has the details"
    assert error["code"] == -32603 and error["message"] == "Internal error"
