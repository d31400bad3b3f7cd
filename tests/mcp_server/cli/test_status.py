"""`assay status`, run as a separate process the way a person or a script calls it: the in-process sentence when no
pool is configured, the raw result with --json, Prefect not answering said (exit 1) beside the store's batches; and
the tables it prints for a pool with workers, runs and batches."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.core.cluster_status import IN_PROCESS
from mcp_server.cli.status import render
from store import batches as store_batches
from store import jobs as store_jobs
from store.engine import make_engine
from tests.e2e.conftest import free_port
from tests.mcp_server.test_cli import assay


@pytest.fixture
def store(tmp_path: Path):
    """The engine of the store the command reads (ASSAY_DATA_DIR is tmp_path/data)."""
    (tmp_path / "data").mkdir()
    engine = make_engine(f"sqlite:///{tmp_path / 'data' / 'assay.db'}")
    yield engine
    engine.dispose()


def test_with_no_pool_it_prints_that_plans_run_in_process(tmp_path):
    res = assay(tmp_path, "status")
    assert res.returncode == 0, res.stderr
    assert res.stdout == IN_PROCESS + "\n"


def test_json_prints_the_raw_result(tmp_path):
    res = assay(tmp_path, "status", "--json")
    assert res.returncode == 0, res.stderr
    status = json.loads(res.stdout)
    assert (status["mode"], status["pool"], status["message"]) == ("in-process", None, IN_PROCESS)


def test_a_prefect_that_does_not_answer_is_said_and_exits_1_with_the_stores_batches(tmp_path, store):
    job_id = store_jobs.create_job(store, root="/data", kind="plan")
    (batch_id,) = store_batches.create(store, job_id=job_id, execution_id=5, position=1, ranges=[("", None, 30)])
    store_batches.claim(store, batch_id, worker="host-a-11", task_run_id=None)
    url = f"http://127.0.0.1:{free_port()}/api"
    res = assay(tmp_path, "status", "--work-pool", "assay", PREFECT_API_URL=url)
    assert res.returncode == 1, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"Work pool assay: Prefect's API at {url} does not answer")
    header = lines.index(next(line for line in lines if line.startswith("BATCH ")))
    assert lines[header].split() == ["BATCH", "EXECUTION", "OUTCOME", "K", "ENTRIES", "WORKER", "ATTEMPT", "LEASE",
                                     "AGE"]
    assert lines[header + 1].split()[:7] == [str(batch_id), "5", "1", "1", "30", "host-a-11", "1"]


def test_the_tables_show_each_worker_with_its_batches_its_runs_and_the_batches_in_flight():
    status = {
        "message": "Work pool assay (process, ready): 1 of 2 worker(s) online, 1 run(s) and 1 outcome batch(es) in "
                   "flight.",
        "workers": [{"name": "w1", "status": "ONLINE", "last_heartbeat": "2025-01-01T10:00:00+00:00",
                     "seconds_since_heartbeat": 3.2},
                    {"name": "w2", "status": "OFFLINE", "last_heartbeat": None, "seconds_since_heartbeat": None}],
        "runs": [{"name": "brave-fox", "state": "Running", "deployment": "photos", "worker": "w1", "process": None,
                  "job_id": 12, "progress": 40.0, "stage": "thumbnail"}],
        "batches_in_flight": [{"batch_id": 9, "execution_id": 4, "position": 2, "k": 3, "entries": 50,
                               "worker": "w1", "attempt": 2, "seconds_since_heartbeat": 1.0}],
        "batches_done_last_hour": {"w1": 7, "gone-3": 2},
    }
    lines = render(status)
    assert lines[0] == status["message"]
    rows = [line.split() for line in lines if line]
    assert ["w1", "ONLINE", "2025-01-01T10:00:00+00:00", "3", "s", "7"] in rows
    assert ["w2", "OFFLINE", "-", "-", "0"] in rows
    assert ["gone-3", "2"] in rows  # finished batches, no longer listed by Prefect
    assert ["brave-fox", "Running", "photos", "w1", "12", "40%", "thumbnail"] in rows
    assert ["9", "4", "2", "3", "50", "w1", "2", "1", "s"] in rows
