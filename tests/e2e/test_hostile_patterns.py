"""Caller-supplied patterns cannot stall the server: a regular expression that backtracks exponentially in Python's
``re`` (which holds the GIL, so nothing else is answered) runs in linear time, and a second call made meanwhile is
answered. The timeouts only bound a hang; nothing here measures time."""

from __future__ import annotations

import anyio
import pytest
from mcp import Client

from tests.e2e.conftest import _call

pytestmark = pytest.mark.e2e

EVIL_NAME = "a" * 34 + "!"
EVIL_PATTERN = "^(a+)+$"


async def test_catastrophic_regex_neither_stalls_its_call_nor_the_calls_beside_it(http_server, tree):
    (tree / EVIL_NAME).write_bytes(b"x")
    server = http_server()
    async with Client(server.url) as client:
        await _call(client, "index", {"root": str(tree), "async": False, "maxAge": 0})
        await _call(client, "resource-set-create", {"name": "home"})
        await _call(client, "resource-set-modify", {"name": "home", "operation": "add",
                                                    "paths": [str(tree / EVIL_NAME), str(tree / "Photos")]})
        answers: dict[str, dict] = {}

        async def fuzzy() -> None:
            answers["fuzzy"] = await _call(client, "resource-fuzzy-match", {
                "name": "home", "field": "name", "pattern": EVIL_PATTERN, "mode": "regex"})

        async def beside() -> None:
            await anyio.sleep(0.5)  # let the pattern start first
            answers["beside"] = await _call(client, "resource-set-list", {})

        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:
                tg.start_soon(fuzzy)
                tg.start_soon(beside)
    assert answers["fuzzy"]["total_count"] == 0  # the name ends in "!", so the pattern matches nothing
    assert [s["name"] for s in answers["beside"]["resource_sets"]] == ["home"]


async def test_plan_matches_with_a_catastrophic_regex_is_answered_in_sql_and_in_python(http_server, tree):
    (tree / EVIL_NAME).write_bytes(b"x")
    server = http_server()
    plan = f"plan evil\nsource home index {tree}\nrule r when name matches \"{EVIL_PATTERN}\"\n"
    async with Client(server.url) as client:
        await _call(client, "index", {"root": str(tree), "async": False, "maxAge": 0})
        with anyio.fail_after(30):
            preview = await _call(client, "plan-preview", {"text": plan})  # pushed down to SQL
            explained = await _call(client, "plan-explain", {"text": plan, "path": str(tree / EVIL_NAME)})  # Python
    assert preview["rules"][0]["matched"] == 0
    assert explained["rules"][0]["condition_passed"] is False
