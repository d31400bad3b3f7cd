"""MCP progress for long work done while the client waits (index async=false, plan-execute wait=true), seen through a
real client's progress callback: increasing, out of 100, ending at 100."""

from __future__ import annotations

import anyio

from mcp_server.tools.common import McpProgress


def recorder():
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    return seen, on_progress


def assert_increasing_to_100(seen) -> None:
    values = [p for p, _, _ in seen]
    assert values, "no progress notification"
    assert all(a < b for a, b in zip(values, values[1:])), values
    assert values[-1] == 100 and all(total == 100 for _, total, _ in seen)


async def test_synchronous_index_reports_progress_up_to_100(client, tree):
    for i in range(300):
        (tree / "docs" / f"n{i}.txt").write_text("x")
    seen, on_progress = recorder()
    result = await client.call_tool("index", {"root": str(tree), "async": False}, progress_callback=on_progress)
    assert not result.is_error, result.content[0].text
    assert_increasing_to_100(seen)
    assert "files" in seen[-1][2]


async def test_plan_execute_with_wait_reports_progress_up_to_100(client, tree):
    await client.call_tool("plan-create", {"text": f"plan p\nsource s index {tree}\nrule r when size > 1\n"
                                                   "  do selection_set big\n"})
    seen, on_progress = recorder()
    result = await client.call_tool("plan-execute", {"name": "p", "wait": True}, progress_callback=on_progress)
    assert not result.is_error, result.content[0].text
    assert_increasing_to_100(seen)
    assert seen[-1][2].startswith("success")


async def test_no_progress_is_sent_when_the_client_did_not_ask(client, tree):
    result = await client.call_tool("index", {"root": str(tree), "async": False})
    assert not result.is_error  # (the SDK drops progress without a token; the call must not fail on it)


async def test_progress_fed_from_a_worker_thread_never_goes_back_and_ends_at_100():
    sent = []

    class Ctx:  # the one method McpProgress uses of the SDK's Context
        async def report_progress(self, progress, total, message):
            sent.append(progress)

    progress = McpProgress(Ctx(), interval=0)

    def work():
        for percent in (0, 10, 5, 10, 40, 39.99, 100, 120):  # a stage that re-estimates may report less
            progress.update(percent, "working")

    await anyio.to_thread.run_sync(work)
    await progress.finish("done")
    assert sent == [0, 10, 40, 99.9, 100]
