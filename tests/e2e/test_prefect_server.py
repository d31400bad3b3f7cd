"""A plan run against a real Prefect server (`prefect server start` on a loopback port): the flow run, its named task
runs and the summary artifact are recorded there, as a person would see them in the Prefect UI."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from flows.core.prefect import seed_home
from tests.e2e.conftest import REPO, free_port

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def prefect_api(tmp_path_factory) -> str:
    home = tmp_path_factory.mktemp("prefect-server")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_")}
    env.update(PREFECT_HOME=str(home), PREFECT_SERVER_ANALYTICS_ENABLED="false", PREFECT_UI_ENABLED="false",
               PREFECT_LOGGING_LEVEL="WARNING")
    seed_home(home, env)  # the suite's migrated Prefect database, when scripts/test made one
    log = home / "server.log"
    prefect = Path(sys.executable).parent / "prefect"
    with open(log, "wb") as out:
        proc = subprocess.Popen([str(prefect), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    url = f"http://127.0.0.1:{port}/api"
    try:
        deadline = time.monotonic() + 180
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"prefect server exited with {proc.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"prefect server did not answer on {port}:\n{log.read_text()}")
            time.sleep(0.5)
        yield url
    finally:
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(proc.pid, signal.SIGKILL)


def _post(url: str, path: str, body: dict) -> list[dict]:
    response = httpx.post(f"{url}{path}", json=body, timeout=10)
    response.raise_for_status()
    return response.json()


def test_a_plan_run_is_recorded_in_the_prefect_server_with_named_task_runs(prefect_api, tmp_path, tree):
    plan = tmp_path / "media.yaml"
    plan.write_text(f"""name: media
sources:
  - name: home
    type: filesystem.index
    config: {{path: "{tree}"}}
rules:
  - name: photos
    when: media_type = image
    outcomes: [{{type: selection_set, selectionSetName: photos}}]
  - name: big-videos
    when: media_type = video and size > 10KB
    outcomes: [{{type: selection_set, selectionSetName: big-videos}}]
""")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "ASSAY_"))}
    env.update(PREFECT_API_URL=prefect_api, PREFECT_HOME=str(tmp_path / "client-prefect"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false")
    done = subprocess.run([sys.executable, "-m", "mcp_server.cli", "plan", "run", str(plan), "--root", str(tree),
                           "--data-dir", str(tmp_path / "data")], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "success: 9 entries processed, 4 matched" in done.stdout

    runs = _post(prefect_api, "/flow_runs/filter", {"flow_runs": {"name": {"any_": ["media"]}}})
    assert len(runs) == 1
    run = runs[0]
    deadline = time.monotonic() + 30
    while True:  # task-run states reach the server as events, a moment after the flow returns
        tasks = _post(prefect_api, "/task_runs/filter", {"flow_runs": {"id": {"any_": [run["id"]]}},
                                                         "sort": "EXPECTED_START_TIME_ASC"})
        done = [t for t in tasks if t["state"] and t["state"]["type"] == "COMPLETED"]
        if len(done) >= 5 and len(done) == len(tasks) or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    # every stage a named task run (their order in the API can tie: compare as a multiset, then the scan first)
    names = [t["name"] for t in tasks]
    assert sorted(names) == sorted(["scan home", "match photos", "match big-videos", "selection_set photos [batch 1]",
                                    "selection_set big-videos [batch 1]"])
    by_start = sorted(tasks, key=lambda t: t["start_time"] or "")
    assert by_start[0]["name"] == "scan home"
    assert all(t["state"]["type"] == "COMPLETED" for t in tasks)
    flow_run = httpx.get(f"{prefect_api}/flow_runs/{run['id']}", timeout=10).json()
    assert flow_run["state"]["type"] == "COMPLETED"
    flow = httpx.get(f"{prefect_api}/flows/{flow_run['flow_id']}", timeout=10).json()
    assert flow["name"] == "assay-plan"
    artifacts = _post(prefect_api, "/artifacts/filter", {"artifacts": {"key": {"any_": ["plan-media"]}}})
    assert artifacts and "execution" in artifacts[0]["data"]
