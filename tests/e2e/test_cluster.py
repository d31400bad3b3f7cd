"""A work pool for real, on loopback: a PostgreSQL store, a Prefect server, `assay serve --work-pool` and two `assay
worker` processes with their own data dirs and one shared artifact cache (bench/cluster_parts.py starts each as the
README says). Worker w2 runs in a mount namespace of its own where the folder ``blind/`` is hidden: a path not
mounted on that machine.

The tests share the cluster (it takes ~30 s to start) and run in file order; those that stop a worker start it
again."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import time
from pathlib import Path
from typing import Any, Iterator

import httpx
import pytest
from mcp import Client
from PIL import Image
from sqlalchemy import create_engine, text

from bench.cluster_parts import assay_serve, assay_worker, have_postgres, prefect_server
from tests.conftest import fresh_pg_database

pytestmark = [pytest.mark.e2e, pytest.mark.postgres,
              pytest.mark.skipif(not have_postgres(), reason="PostgreSQL is not installed (./scripts/setup)"),
              pytest.mark.skipif(not shutil.which("unshare"), reason="util-linux's unshare is not installed")]

POOL = "assay-test"
BATCH = "6"  # entries per batch: many batches from few files


def pictures(folder: Path, count: int, size: int = 1600) -> list[Path]:
    """``count`` distinct pictures (one PNG with a distinct tail each: decoders ignore it, hashes differ)."""
    folder.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (size, size), (10, 200, 30)).save(folder / "one.bin", format="PNG")
    body = (folder / "one.bin").read_bytes()
    (folder / "one.bin").unlink()
    out = []
    for i in range(count):
        path = folder / f"p{i:03}.png"
        path.write_bytes(body + f"copy {i}".encode())
        out.append(path)
    return out


class Cluster:
    def __init__(self, work: Path, db: str, api: str, files: Path, cache: Path, stack: contextlib.ExitStack) -> None:
        self.work, self.db, self.api, self.files, self.cache, self.stack = work, db, api, files, cache, stack
        self.engine = create_engine(db)
        self.workers: dict[str, Any] = {}
        self.server: Any = None

    def start_worker(self, name: str, stack: contextlib.ExitStack | None = None) -> Any:
        blind = self.files / "blind"
        prefix = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                  f"mount -t tmpfs none {blind} && exec \"$0\" \"$@\""] if name == "w2" else None
        part = (stack or self.stack).enter_context(assay_worker(
            self.work, name, pool=POOL, database_url=self.db, api_url=self.api, cache_dir=self.cache,
            extra_env={"ASSAY_BATCH_ENTRIES": BATCH}, prefix=prefix))
        self.workers[name] = part
        return part

    def start_server(self, stack: contextlib.ExitStack | None = None) -> Any:
        self.server = (stack or self.stack).enter_context(assay_serve(
            self.work, pool=POOL, database_url=self.db, api_url=self.api, cache_dir=self.cache, roots=[self.files]))
        return self.server

    async def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        async with Client(self.server.url) as client:
            result = await client.call_tool(tool, arguments)
        assert not result.is_error, result.content
        return result.structured_content or {}

    def sql(self, query: str, **params: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(text(query), params))

    def wait_execution(self, execution_id: int, timeout: float = 240) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            rows = self.sql("SELECT status, error_message, outcomes_applied, summary_json FROM plan_executions "
                            "WHERE id = :id", id=execution_id)
            if rows and rows[0].status != "running":
                return dict(rows[0]._mapping)
            time.sleep(0.5)
        raise AssertionError(f"execution {execution_id} still running after {timeout:.0f} s:\n{self.logs()}\n"
                             f"{json.dumps(self.batches(execution_id), indent=1, default=str)}\n"
                             f"{self.task_runs()}")

    async def start_and_wait_for_a_batch(self, name: str, folder: Path) -> tuple[int, dict[str, Any]]:
        """Create plan ``name`` over ``folder``, start it without waiting, and return (execution id, the first
        batch seen running): the run is handed over and under way."""
        await self.call("plan-create", {"text": plan_text(name, folder)})
        execution_id = (await self.call("plan-execute", {"name": name, "wait": False}))["execution_id"]
        deadline = time.monotonic() + 180
        while True:
            assert time.monotonic() < deadline, self.logs() + self.task_runs()
            running = [b for b in self.batches(execution_id) if b["status"] == "running"]
            if running:
                return execution_id, running[0]
            time.sleep(0.1)

    def task_runs(self) -> str:
        with httpx.Client(base_url=self.api, timeout=30) as api:
            runs = api.post("/task_runs/filter", json={"limit": 200}).json()
            flows = api.post("/flow_runs/filter", json={"limit": 50}).json()
            logs = api.post("/logs/filter", json={"limit": 200, "sort": "TIMESTAMP_DESC"}).json()
        return "\n".join([*(f"task {r['name']} {r['state']['type']} {r['id']}" for r in runs),
                          *(f"flow {r['name']} {r['state']['type']} {r['state'].get('message')}" for r in flows),
                          *(f"log {x['timestamp']} {x['message'][:300]}" for x in reversed(logs))])

    def logs(self) -> str:
        parts = [*self.workers.values(), *([self.server] if self.server else [])]
        return "\n".join(f"--- {p.name}\n{p.log_text()[-2500:]}" for p in parts)

    def batches(self, execution_id: int) -> list[dict[str, Any]]:
        return [dict(r._mapping) for r in self.sql(
            "SELECT id, k, status, worker, attempt, history_json, result_json, started_at, finished_at "
            "FROM outcome_batches WHERE execution_id = :id ORDER BY k", id=execution_id)]

    def thumbnails_per_entry(self, folder: Path) -> dict[str, int]:
        rows = self.sql("SELECT e.path, count(a.id) FROM entries e LEFT JOIN artifacts a ON a.entry_id = e.id "
                        "AND a.type = 'thumbnail' WHERE e.path LIKE :p AND e.kind = 'file' GROUP BY e.path",
                        p=f"{folder}/%")
        return {path: n for path, n in rows}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory, pg_url) -> Iterator[Cluster]:
    work = tmp_path_factory.mktemp("cluster")
    files, cache = work / "files", work / "cache"
    (files / "blind").mkdir(parents=True)
    cache.mkdir()
    with contextlib.ExitStack() as stack:
        db = stack.enter_context(fresh_pg_database(pg_url, "cluster"))
        server = stack.enter_context(prefect_server(work, scheduler_seconds=2))
        c = Cluster(work, db, server.url, files, cache, stack)
        c.start_worker("w1")
        c.start_worker("w2")
        c.start_server()
        yield c
        c.engine.dispose()


def answer(api: httpx.Client, method: str, path: str, **kwargs: Any) -> Any:
    """Prefect's answer to a request, asked again while it is busy (503), as Prefect's own client does."""
    for _ in range(30):
        response = api.request(method, path, **kwargs)
        if response.status_code != 503:
            return response.json()
        time.sleep(1)
    return response.json()


def plan_text(name: str, folder: Path, *, source: str | None = None) -> str:
    src = source or f"source files index {folder}"
    return (f"plan {name}\n{src}\nrule thumbs when extension = .png\n"
            "  do classifier generate_thumbnail maxWidth=96 maxHeight=96\n")


async def test_an_agents_run_spreads_its_batches_over_both_workers_and_does_each_file_once(cluster: Cluster) -> None:
    folder = cluster.files / "spread"
    made = pictures(folder, 36, size=4000)  # big enough that a batch outlasts a second worker's start (~0.3 s)
    await cluster.call("plan-create", {"text": plan_text("spread", folder)})
    row = await cluster.call("plan-execute", {"name": "spread", "wait": True})
    assert row["status"] == "success", (row, cluster.logs())
    assert row["outcomes_applied"] == len(made)
    batches = cluster.batches(row["execution_id"])
    assert len(batches) == 6 and all(b["status"] == "done" for b in batches)
    assert {b["worker"] for b in batches} == {"w1", "w2"}, batches  # six batches, two free workers: both take some
    assert set(cluster.thumbnails_per_entry(folder).values()) == {1}
    assert all((cluster.cache / "/".join(p.split("/")[1:])).is_file()
               for (p,) in cluster.sql("SELECT cache_path FROM artifacts WHERE type = 'thumbnail'"))


async def test_a_run_started_from_the_deployment_as_the_ui_does_runs_on_the_pool(cluster: Cluster) -> None:
    folder = cluster.files / "ui"
    pictures(folder, 8, size=400)
    # a yearly schedule: the deployment on the pool carries it (Prefect's scheduler fires it: test_plan_schedules)
    await cluster.call("plan-create", {"text": plan_text("ui-run", folder) + 'schedule cron "0 3 1 1 *"\n'})
    with httpx.Client(base_url=cluster.api, timeout=30) as api:
        deployment = answer(api, "GET", "/deployments/name/assay-plan/ui-run")
        assert deployment["work_pool_name"] == POOL
        assert [s["schedule"]["cron"] for s in deployment["schedules"]] == ["0 3 1 1 *"], deployment["schedules"]
        run = answer(api, "POST", f"/deployments/{deployment['id']}/create_flow_run", json={})
        assert "id" in run, run  # Prefect refused the run: its answer says why
        deadline = time.monotonic() + 180
        while (state := answer(api, "GET", f"/flow_runs/{run['id']}")["state"])["type"] not in (
                "COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            assert time.monotonic() < deadline, cluster.logs() + cluster.task_runs()
            time.sleep(0.5)
    assert state["type"] == "COMPLETED", (state, cluster.logs())
    plan = await cluster.call("plan-get", {"name": "ui-run"})
    last = plan["executions"][0]
    assert last["trigger"] == "prefect" and last["status"] == "success"
    assert set(cluster.thumbnails_per_entry(folder).values()) == {1}


async def test_a_file_a_worker_cannot_see_is_that_files_error_with_the_workers_name(cluster: Cluster) -> None:
    blind = cluster.files / "blind"
    pictures(blind, 12, size=300)
    await cluster.call("index", {"root": str(blind), "async": False})  # by the server, which sees every file
    await cluster.call("query-create", {"name": "blind", "query": {"path_prefix": str(blind)}})
    await cluster.call("plan-create", {  # a query source: the worker scans nothing it cannot see
        "name": "blind", "sources": [{"name": "picked", "type": "query", "config": {"query": "blind"}}],
        "rules": [{"name": "thumbs", "when": "extension = .png", "outcomes": [
            {"type": "classifier", "classifierOperation": "generate_thumbnail", "maxWidth": 96, "maxHeight": 96}]}]})
    w1 = cluster.workers.pop("w1")
    w1.proc.send_signal(signal.SIGTERM)  # only w2, which cannot see blind/, is left
    w1.proc.wait(60)
    try:
        row = await cluster.call("plan-execute", {"name": "blind", "wait": True})
    finally:
        cluster.start_worker("w1")
    assert row["status"] in ("partial", "error"), row
    samples = [s for r in row["summary"]["rules"].values() for o in r["outcomes"] for s in o["error_samples"]]
    assert samples and all("(on worker w2)" in s for s in samples), samples
    assert {b["worker"] for b in cluster.batches(row["execution_id"])} == {"w2"}


async def test_a_killed_workers_batch_is_done_again_by_another_and_every_file_once(cluster: Cluster) -> None:
    folder = cluster.files / "kill"
    made = pictures(folder, 36, size=1800)
    execution_id, victim = await cluster.start_and_wait_for_a_batch("kill", folder)
    part = cluster.workers.pop(victim["worker"])
    os.kill(part.proc.pid, signal.SIGKILL)  # the worker alone: a machine lost mid-batch
    part.proc.wait(30)
    killed_at = time.time()
    try:
        done = cluster.wait_execution(execution_id)
    finally:
        cluster.start_worker(victim["worker"])
    assert done["status"] == "success", (done, cluster.logs())
    assert done["outcomes_applied"] >= len(made)
    batch = next(b for b in cluster.batches(execution_id) if b["id"] == victim["id"])
    history = json.loads(batch["history_json"])
    assert history[0]["worker"] == victim["worker"] and history[0]["outcome"] == "lost"
    # handed back when the killed process's store connection closed (its lock went with it), not after the lease
    assert history[0]["at"] - killed_at < 4.0, history
    assert batch["status"] == "done" and batch["attempt"] == 2 and batch["worker"] != victim["worker"]
    assert batch["finished_at"] > killed_at
    assert set(cluster.thumbnails_per_entry(folder).values()) == {1}


async def test_a_stopped_worker_hands_back_its_batch_and_its_execution_goes_on_elsewhere(cluster: Cluster) -> None:
    """SIGTERM to the worker that runs the execution's flow, while batches run: the batch it holds is finished or
    handed back, its flow run ends crashed, and the server hands the run to the pool again, which takes it up where
    it was (the batches done stay done)."""
    folder = cluster.files / "term"
    pictures(folder, 36, size=1800)
    execution_id, _ = await cluster.start_and_wait_for_a_batch("term", folder)
    first_flow_run = cluster.sql("SELECT flow_run_id FROM plan_executions WHERE id = :id", id=execution_id)[0][0]
    with httpx.Client(base_url=cluster.api, timeout=30) as api:
        labels = answer(api, "GET", f"/flow_runs/{first_flow_run}").get("labels") or {}
    host = labels.get("prefect.worker.name")
    assert host in cluster.workers, labels
    part = cluster.workers.pop(host)
    part.proc.send_signal(signal.SIGTERM)
    try:
        assert part.proc.wait(60) == 0, part.log_text()[-3000:]
        done = cluster.wait_execution(execution_id)
    finally:
        cluster.start_worker(host)
    assert done["status"] == "success", (done, cluster.logs())
    again = cluster.sql("SELECT flow_run_id FROM plan_executions WHERE id = :id", id=execution_id)[0][0]
    assert again != first_flow_run  # handed to the pool again
    for batch in cluster.batches(execution_id):
        history = json.loads(batch["history_json"])
        assert batch["status"] == "done" and all(h["outcome"] in ("handed back", "lost") for h in history)
        assert batch["attempt"] == len(history) + 1
    assert set(cluster.thumbnails_per_entry(folder).values()) == {1}


async def test_a_run_goes_on_when_the_server_that_started_it_dies(cluster: Cluster) -> None:
    folder = cluster.files / "server"
    made = pictures(folder, 24, size=1600)
    execution_id, _ = await cluster.start_and_wait_for_a_batch("server-dies", folder)
    server = cluster.server
    os.kill(server.proc.pid, signal.SIGKILL)
    server.proc.wait(30)
    cluster.start_server()  # back, on the same data dir and store, while the run may still go on
    done = cluster.wait_execution(execution_id)
    assert done["status"] == "success", (done, cluster.logs())
    plan = await cluster.call("plan-get", {"name": "server-dies"})
    assert json.dumps(plan).count('"success"') >= 1
    assert done["outcomes_applied"] == len(made)


async def test_cluster_status_shows_the_pool_its_workers_and_where_the_batches_ran(cluster: Cluster) -> None:
    folder = cluster.files / "status"
    pictures(folder, 24, size=300)
    await cluster.call("plan-create", {"text": plan_text("status", folder)})
    row = await cluster.call("plan-execute", {"name": "status", "wait": True})
    ran = {b["worker"] for b in cluster.batches(row["execution_id"])}
    status = await cluster.call("cluster-status", {})
    assert status["mode"] == "pool" and status["pool"]["name"] == POOL
    online = {w["name"] for w in status["workers"] if w["status"] == "ONLINE"}
    assert {"w1", "w2"} <= online, status["workers"]
    assert ran <= set(status["batches_done_last_hour"]), status["batches_done_last_hour"]


async def test_text_extracted_on_the_workers_is_found_by_every_server_on_the_store(cluster: Cluster) -> None:
    folder = cluster.files / "texts"
    folder.mkdir()
    for i in range(12):
        (folder / f"note{i:02}.txt").write_text(f"note {i}\n" + ("quasar line\n" if i % 3 == 0 else "plain\n"))
    await cluster.call("plan-create", {"text": f"plan texts\nsource files index {folder}\n"
                                               "rule t when extension = .txt\n  do extract_text\n"})
    row = await cluster.call("plan-execute", {"name": "texts", "wait": True})
    assert row["status"] == "success" and row["outcomes_applied"] == 12, (row, cluster.logs())
    assert {b["worker"] for b in cluster.batches(row["execution_id"])} <= {"w1", "w2"}
    first = await cluster.call("search_documents", {"query": "quasar", "scope": {"type": "global"}})
    with contextlib.ExitStack() as stack:  # a second server on the same store, started now: it catches up too
        other = stack.enter_context(assay_serve(cluster.work, pool=None, database_url=cluster.db, api_url=cluster.api,
                                                cache_dir=cluster.cache, roots=[cluster.files], name="second"))
        async with Client(other.url) as client:
            second = (await client.call_tool("search_documents", {"query": "quasar", "scope": {"type": "global"}})) \
                .structured_content or {}
    for found in (first, second):
        assert found["total_matches"] == 4, found
