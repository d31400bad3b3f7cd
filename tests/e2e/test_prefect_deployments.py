"""Prefect runs the work, it does not only record it: `assay serve` starts Prefect's server with its UI and serves a
deployment per plan; a run started from Prefect (the UI's Run, here the same REST call) runs in a separate process
from its parameters and lands in the store as plan-execute's would; a failed run is retried from Prefect; a run is
cancelled from Prefect. One server for the module (Prefect's server takes its time to start)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from PIL import Image

from tests.e2e.conftest import REPO, _stop, free_port, serve_args, server_env, wait_listening

pytestmark = pytest.mark.e2e


class Served:
    def __init__(self, url: str, api: str, tree: Path, log: Path) -> None:
        self.url, self.api, self.tree, self.log = url, api, tree, log

    def post(self, path: str, body: dict[str, Any]) -> Any:
        response = httpx.post(f"{self.api}{path}", json=body, timeout=30)
        response.raise_for_status()
        return response.json()

    def get(self, path: str) -> Any:
        response = httpx.get(f"{self.api}{path}", timeout=30)
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


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("deployments")
    tree = tmp / "home"
    (tree / "notes").mkdir(parents=True)
    for i in range(3):
        (tree / "notes" / f"n{i}.txt").write_text(f"note {i}\n")
    (tree / "pictures").mkdir()
    # a run long enough to be cancelled midway on any machine: 240 large pictures (~0.15 s a thumbnail each), written
    # cheaply as one PNG copied with a distinct trailing byte string (decoders ignore it; each file hashes apart)
    Image.new("RGB", (4000, 4000), (10, 200, 30)).save(tmp / "big.png")
    picture = (tmp / "big.png").read_bytes()
    for i in range(240):
        (tree / "pictures" / f"p{i:03}.png").write_bytes(picture + f"copy {i}".encode())
    port = free_port()
    log = tmp / "server.log"
    env = server_env(tmp, prefect=True)
    env["ASSAY_PREFECT_UI"] = "1"  # the default of assay serve: Prefect's server with its UI and services
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
        yield Served(f"http://127.0.0.1:{port}/mcp", api, tree, log)
    finally:
        _stop(proc)


def subprocess_popen(args: list[str], out: Any, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)


async def call(served: Served, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    async with Client(served.url) as client:
        result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    return result.structured_content


async def test_prefect_serves_its_ui_beside_the_api(served: Served) -> None:
    page = httpx.get(served.api.removesuffix("/api") + "/", timeout=30)
    assert page.status_code == 200 and "<html" in page.text.lower()


async def test_a_run_started_from_the_plans_deployment_lands_in_the_store(served: Served) -> None:
    await call(served, "plan-create", {"text": f"plan notes\nsource home index {served.tree / 'notes'}\n"
                                               "rule t when extension = .txt\n  do selection_set notes-set"})
    deployment = served.deployment("notes")
    assert deployment["parameters"] == {"plan_name": "notes"}
    run = served.post(f"/deployments/{deployment['id']}/create_flow_run", {})
    final = served.wait_final(run["id"])
    assert final["state"]["type"] == "COMPLETED", served.log.read_text()[-3000:]
    plan = await call(served, "plan-get", {"name": "notes"})
    execution = next(e for e in plan["executions"] if e["flow_run_id"] == run["id"])
    assert execution["trigger"] == "prefect" and execution["status"] == "success"
    assert execution["entries_matched"] == 3
    members = await call(served, "resource-set-get", {"name": "notes-set", "include_entries": True})
    assert members["entry_count"] == 3


async def test_a_failed_run_is_retried_from_prefect_under_the_same_execution(served: Served) -> None:
    folder = served.tree / "later"
    folder.mkdir()
    await call(served, "plan-create", {"text": f"plan later\nsource s index {folder}\n"
                                               "rule t when extension = .txt\n  do selection_set later-set"})
    folder.rmdir()  # the run fails: its source folder is gone
    failed = await call(served, "plan-execute", {"name": "later", "wait": True})
    assert failed["status"] == "error" and "does not exist" in failed["error_message"]
    flow_run = served.wait_final(failed["flow_run_id"])
    assert flow_run["state"]["type"] == "FAILED" and flow_run["deployment_id"] == served.deployment("later")["id"]
    folder.mkdir()
    (folder / "a.txt").write_text("a\n")
    # the UI's Retry: the failed flow run goes back to Scheduled (AwaitingRetry) and the server's runner takes it
    served.post(f"/flow_runs/{failed['flow_run_id']}/set_state",
                {"state": {"type": "SCHEDULED", "name": "AwaitingRetry"}, "force": True})
    time.sleep(1)
    assert served.wait_final(failed["flow_run_id"])["state"]["type"] == "COMPLETED"
    plan = await call(served, "plan-get", {"name": "later"})
    retried = next(e for e in plan["executions"] if e["execution_id"] == failed["execution_id"])
    assert retried["status"] == "success" and retried["entries_matched"] == 1
    shutil.rmtree(folder)


async def test_a_run_is_cancelled_from_prefect(served: Served) -> None:
    await call(served, "plan-create", {"text": f"plan thumbs\nsource s index {served.tree / 'pictures'}\n"
                                               "rule t when extension = .png\n  do classifier generate_thumbnail"})
    started = await call(served, "plan-execute", {"name": "thumbs"})
    deadline = time.monotonic() + 60
    while True:  # the flow run exists once the execution runs
        plan = await call(served, "plan-get", {"name": "thumbs"})
        execution = next(e for e in plan["executions"] if e["execution_id"] == started["execution_id"])
        if execution["flow_run_id"]:
            break
        assert time.monotonic() < deadline
        time.sleep(0.2)
    served.post(f"/flow_runs/{execution['flow_run_id']}/set_state", {"state": {"type": "CANCELLING"}, "force": True})
    deadline = time.monotonic() + 90
    while execution["status"] == "running":
        assert time.monotonic() < deadline, served.log.read_text()[-3000:]
        time.sleep(0.5)
        plan = await call(served, "plan-get", {"name": "thumbs"})
        execution = next(e for e in plan["executions"] if e["execution_id"] == started["execution_id"])
    assert execution["status"] == "error" and execution["error_message"].startswith("cancelled")
    assert execution["outcomes_applied"] < 240  # stopped midway
    assert served.wait_final(execution["flow_run_id"])["state"]["type"] == "CANCELLED"
