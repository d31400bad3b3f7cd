"""Prefect runs the work, it does not only record it: `assay serve` starts Prefect's server with its UI and serves a
deployment per plan; a run started from Prefect (the UI's Run, here the same REST call) runs in a separate process
from its parameters and lands in the store as plan-execute's would; a failed run is retried from Prefect; a run is
cancelled from Prefect. One server for the module (Prefect's server takes its time to start)."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from PIL import Image

from tests.e2e.conftest import server_env
from tests.e2e.prefect_serve import Served, call, serving

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Served:
    tmp = tmp_path_factory.mktemp("deployments")
    tree = tmp / "home"
    (tree / "notes").mkdir(parents=True)
    for i in range(3):
        (tree / "notes" / f"n{i}.txt").write_text(f"note {i}\n")
    write_pictures(tree / "pictures")
    with serving(tmp, tree, server_env(tmp, prefect=True)) as served:
        yield served


PICTURES = 240


def write_pictures(folder: Path) -> None:
    """A run long enough to be cancelled midway on any machine: 240 large pictures (~0.15 s a thumbnail each), written
    cheaply as one PNG copied with a distinct trailing byte string (decoders ignore it; each file hashes apart)."""
    folder.mkdir(parents=True)
    Image.new("RGB", (4000, 4000), (10, 200, 30)).save(folder / "big.bin", format="PNG")
    picture = (folder / "big.bin").read_bytes()
    (folder / "big.bin").unlink()
    for i in range(PICTURES):
        (folder / f"p{i:03}.png").write_bytes(picture + f"copy {i}".encode())


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
    assert execution["outcomes_applied"] < PICTURES  # stopped midway
    assert served.wait_final(execution["flow_run_id"])["state"]["type"] == "CANCELLED"


def alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def run_processes(server: psutil.Process, before: set[int], children: dict[int, psutil.Process],
                  workers: dict[int, psutil.Process]) -> None:
    """Adds the server's spawned children that were not there ``before`` to ``children``, their descendants to
    ``workers``."""
    for child in server.children():
        try:
            if child.pid in before or "spawn_main" not in " ".join(child.cmdline()):  # not the resource tracker
                continue
            children.setdefault(child.pid, child)
            for worker in child.children(recursive=True):
                workers.setdefault(worker.pid, worker)
        except psutil.NoSuchProcess:
            pass


async def test_a_run_the_runner_started_is_cancelled_from_prefect(served: Served) -> None:
    """The UI's Run, then its Cancel: the run executes in the subprocess the server's Prefect runner spawned (not in
    the server's process, as an agent's run does); the cancel stops it midway, finishes its execution in the store as
    cancelled and leaves none of its processes (the run's own, its classifier workers) behind."""
    folder = served.tree / "ui-pictures"  # pictures of its own: the other cancel test left some of its thumbnails
    write_pictures(folder)
    await call(served, "plan-create", {"text": f"plan ui-thumbs\nsource s index {folder}\n"
                                               "rule t when extension = .png\n  do classifier generate_thumbnail"})
    server = psutil.Process(served.pid)
    before = {p.pid for p in server.children(recursive=True)}
    run = served.post(f"/deployments/{served.deployment('ui-thumbs')['id']}/create_flow_run", {})
    # the run's processes: the runner's child (a spawned interpreter, a direct child of the server) and, once it makes
    # thumbnails, its classifier workers; both seen while it runs, since once killed its children are reparented
    children: dict[int, psutil.Process] = {}
    workers: dict[int, psutil.Process] = {}
    execution: dict[str, Any] | None = None
    deadline = time.monotonic() + 90
    while execution is None or not any(alive(p) for p in workers.values()):
        assert time.monotonic() < deadline, f"the run made no thumbnails:\n{served.log.read_text()[-3000:]}"
        time.sleep(0.2)
        run_processes(server, before, children, workers)
        plan = await call(served, "plan-get", {"name": "ui-thumbs"})
        execution = next((e for e in plan["executions"] if e["flow_run_id"] == run["id"]), None)
        assert served.get(f"/flow_runs/{run['id']}")["state"]["type"] in ("SCHEDULED", "PENDING", "RUNNING")
    assert execution["status"] == "running" and execution["trigger"] == "prefect"
    assert len(children) == 1, children  # the runner's child, nothing else spawned meanwhile
    # the UI's Cancel
    served.post(f"/flow_runs/{run['id']}/set_state", {"state": {"type": "CANCELLING"}, "force": True})
    assert served.wait_final(run["id"], timeout=90)["state"]["type"] == "CANCELLED"
    deadline = time.monotonic() + 30
    while execution["status"] == "running":  # finished by whoever noticed the cancel (see flows/plans/flow.py)
        assert time.monotonic() < deadline, f"execution left running:\n{served.log.read_text()[-3000:]}"
        time.sleep(0.5)
        plan = await call(served, "plan-get", {"name": "ui-thumbs"})
        execution = next(e for e in plan["executions"] if e["flow_run_id"] == run["id"])
    assert execution["status"] == "error" and execution["error_message"].startswith("cancelled"), execution
    assert execution["outcomes_applied"] < PICTURES  # stopped midway
    deadline = time.monotonic() + 10
    while left := [p.pid for p in (*children.values(), *workers.values()) if alive(p)]:
        assert time.monotonic() < deadline, f"processes of the cancelled run still run: {left}"
        time.sleep(0.5)
    shutil.rmtree(folder)
