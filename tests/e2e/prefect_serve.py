"""`assay serve` over HTTP with Prefect's server, its UI and its services (the scheduler among them), as the
end-to-end tests of Prefect's side start it (tests/e2e/test_prefect_deployments.py, test_plan_schedules.py), and the
calls they make: MCP tools, and Prefect's REST API as its UI makes them."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from mcp import Client

from tests.e2e.conftest import REPO, _stop, free_port, serve_args, wait_listening


class Served:
    def __init__(self, url: str, api: str, tree: Path, log: Path, pid: int) -> None:
        self.url, self.api, self.tree, self.log, self.pid = url, api, tree, log, pid

    def post(self, path: str, body: dict[str, Any]) -> Any:
        return self._send("POST", path, body)

    def get(self, path: str) -> Any:
        return self._send("GET", path, None)

    def _send(self, method: str, path: str, body: dict[str, Any] | None) -> Any:
        """One API call; a 503 is asked again, as Prefect's own client does (its server answers so while its
        database is busy, on a loaded machine; nothing was written then)."""
        for attempt in range(5):
            response = httpx.request(method, f"{self.api}{path}", json=body, timeout=30)
            if response.status_code != 503:
                break
            time.sleep(1 + attempt)
        response.raise_for_status()
        return response.json()

    def deployment(self, name: str) -> dict[str, Any]:
        deadline = time.monotonic() + 60
        while True:
            found = self.post("/deployments/filter", {"deployments": {"name": {"any_": [name]}},
                                                      "flows": {"name": {"any_": ["assay-plan"]}}})
            if found:
                return found[0]
            assert time.monotonic() < deadline, f"no deployment {name}; server log:\n{self.log.read_text()[-3000:]}"
            time.sleep(0.5)

    def wait_final(self, flow_run_id: str, timeout: float = 120) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:
            run = self.get(f"/flow_runs/{flow_run_id}")
            if run["state"]["type"] in ("COMPLETED", "FAILED", "CANCELLED", "CRASHED"):
                return run
            assert time.monotonic() < deadline, f"flow run still {run['state']['type']}:\n" \
                                                f"{self.log.read_text()[-3000:]}"
            time.sleep(0.5)


@contextmanager
def serving(tmp: Path, tree: Path, env: dict[str, str]) -> Iterator[Served]:
    """`assay serve` on ``tree`` with Prefect's server, UI and services (the default of assay serve), until the
    block ends; ``env`` is the server's environment (``server_env``, and whatever Prefect settings a test needs)."""
    port = free_port()
    log = tmp / "server.log"
    env = {**env, "ASSAY_PREFECT_UI": "1"}
    with open(log, "wb") as out:
        proc = subprocess_popen(serve_args(tree, prefect=True, extra=["--transport", "http", "--port", str(port)]),
                                out, env)
    try:
        wait_listening(proc, port, log)
        record = tmp / "data" / "prefect-api.json"
        deadline = time.monotonic() + 180
        while not record.exists():
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < deadline, f"Prefect did not start:\n{log.read_text()[-3000:]}"
            time.sleep(0.5)
        api = json.loads(record.read_text())["url"]
        yield Served(f"http://127.0.0.1:{port}/mcp", api, tree, log, proc.pid)
    finally:
        _stop(proc)


def subprocess_popen(args: list[str], out: Any, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)


async def call(served: Served, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with Client(served.url) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content
