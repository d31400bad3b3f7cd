"""The hook Prefect's runner calls once it has stopped a job flow's process (a Cancel in the UI) or the process
crashed: the job's row ends, unless the run ended it itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flows.core.hooks import finish_stopped_job
from store import jobs as store_jobs
from store.engine import get_engine


@dataclass
class FlowRun:
    id: str
    parameters: dict[str, Any] = field(default_factory=dict)


@dataclass
class State:
    cancelled: bool
    message: str = ""

    def is_cancelled(self) -> bool:
        return self.cancelled

    def is_cancelling(self) -> bool:
        return False


def _running_job(url: str, flow_run_id: str) -> int:
    engine = get_engine(url)
    job_id = store_jobs.create_job(engine, root="/data", params={"trigger": "prefect"})
    assert store_jobs.mark_running(engine, job_id=job_id, flow_run_id=flow_run_id)
    return job_id


def test_a_job_stopped_from_prefect_ends_cancelled_and_a_crashed_one_failed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'assay.db'}"
    stopped, crashed = _running_job(url, "run-1"), _running_job(url, "run-2")
    finish_stopped_job(None, FlowRun("run-1", {"store": url}), State(cancelled=True))
    finish_stopped_job(None, FlowRun("run-2", {"store": url}), State(cancelled=False, message="killed by signal 9"))
    one, two = (store_jobs.get_job(get_engine(url), job_id=j) for j in (stopped, crashed))
    assert one["status"] == "cancelled" and one["error_message"].startswith("cancelled from Prefect")
    assert two["status"] == "failed" and "killed by signal 9" in two["error_message"]


def test_a_job_the_run_finished_is_left_as_it_ended(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'assay.db'}"
    engine = get_engine(url)
    job_id = _running_job(url, "run-3")
    store_jobs.finish_job(engine, job_id=job_id, status="completed")
    finish_stopped_job(None, FlowRun("run-3", {"store": url}), State(cancelled=True))
    assert store_jobs.get_job(engine, job_id=job_id)["status"] == "completed"
    finish_stopped_job(None, FlowRun("unknown", {"store": url}), State(cancelled=True))  # no job: nothing to do
