"""Tool errors: readable text for the model, and reference 000's error object as structured content."""

from __future__ import annotations

from tests.conftest import index_sync


async def error_of(client, tool: str, args: dict) -> tuple[str, dict]:
    result = await client.call_tool(tool, args)
    assert result.is_error
    return result.content[0].text, result.structured_content["error"]


async def test_a_refused_call_carries_the_reference_error_object(client):
    text, error = await error_of(client, "resource-set-get", {"name": "nope"})
    assert text.startswith("NOT_FOUND:") and "nope" in text
    assert error["code"] == -32602 and error["message"] == "Invalid params"
    assert error["data"]["field"] == "name" and "nope" in error["data"]["reason"]
    assert error["data"]["type"] == "NOT_FOUND"


async def test_a_value_outside_the_allowed_ones_names_the_parameter_the_choices_and_what_was_sent(client, app, tree):
    index_sync(app, tree)
    text, error = await error_of(client, "navigate", {"path": str(tree), "sort": "colour"})
    assert text == "INVALID_PARAMS: navigate: parameter 'sort': input should be 'name', 'size' or 'mtime' (got \"colour\")"
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
