"""One execution of a plan at a time across processes (flows.plans.exclusive): an execution waits while another
process runs the plan, starts once that process is gone (killed, even: the lock dies with its holder), and gives up
waiting when it is cancelled; a running execution keeps another process from starting the plan. On both stores."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest
from sqlalchemy.engine import Engine

from dsl.model import Plan
from flows.core import outcomes as flow_outcomes
from flows.core.roots import Roots
from flows.plans.service import PlanService
from store import jobs as store_jobs
from store import plans as store_plans
from store.engine import make_engine, store_url
from tests.conftest import wait_for

REPO = Path(__file__).resolve().parents[3]

# Another process on the same store: ``hold`` takes the plan's lock as an execution does and keeps it until killed;
# ``try`` says whether the lock could be taken at once (and lets it go).
OTHER = textwrap.dedent("""
    import sys, time
    from store.engine import get_engine
    from flows.plans.exclusive import _process_lock, plan_exclusive
    url, name, what = sys.argv[1:4]
    engine = get_engine(url)
    if what == "hold":
        with plan_exclusive(engine, url, name) as turn:
            print("held" if turn else "refused", flush=True)
            time.sleep(600)
    else:
        lock = _process_lock(engine, name)
        got = lock.try_acquire()
        if got:
            lock.release()
        print("free" if got else "taken", flush=True)
""")


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request, data_dir: Path) -> Iterator[Engine]:
    url = request.getfixturevalue("pg_database") if request.param == "postgresql" else \
        f"sqlite:///{data_dir / 'assay.db'}"
    engine = make_engine(url)
    yield engine
    engine.dispose()


@pytest.fixture
def service(store: Engine, tree: Path) -> Iterator[PlanService]:
    svc = PlanService(store, Roots.of([str(tree)]), use_prefect=False)
    yield svc
    svc.shutdown()


def media_plan(service: PlanService, tree: Path, **extra: Any) -> Plan:
    plan = Plan.from_object({"name": "media", "sources": [{"name": "home", "type": "filesystem.index",
                                                          "config": {"path": str(tree)}}],
                             "outcomes": [{"type": "selection_set", "selectionSetName": "all"}]} | extra)
    service.save(plan, create=None)
    return plan


def other_process(engine: Engine, what: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", OTHER, store_url(engine), "media", what], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)


@contextmanager
def another_process_holding_the_plan(engine: Engine) -> Iterator[subprocess.Popen[str]]:
    """A second process that has taken the plan "media" and keeps it until it is killed (at the latest on leaving)."""
    other = other_process(engine, "hold")
    try:
        assert answer(other) == "held"
        yield other
    finally:
        other.kill()
        other.wait()


def answer(proc: subprocess.Popen[str]) -> str:
    assert proc.stdout is not None
    return proc.stdout.readline().strip()


def job_status(service: PlanService, execution_id: int) -> str:
    job_id = service.run_id(execution_id)
    assert job_id is not None
    return str(store_jobs.get_job(service.engine, job_id=job_id)["status"])


def test_an_execution_waits_while_another_process_runs_the_plan(service, tree):
    plan = media_plan(service, tree)
    with another_process_holding_the_plan(service.engine) as other:
        started = service.execute(plan, wait=False)
        time.sleep(1.5)  # several turns of its wait: it must still be waiting
        assert job_status(service, started["execution_id"]) == "pending"
        assert store_plans.get_execution(service.engine, execution_id=started["execution_id"])["status"] == "running"
        other.kill()  # the holder dies without letting go: the operating system / the database drops its lock
        other.wait()
        done = service.wait(started["execution_id"], timeout=60)
        assert done["status"] == "success" and done["outcomes_applied"] > 0, done
        assert job_status(service, started["execution_id"]) == "completed"


def test_an_execution_cancelled_while_it_waits_its_turn_never_starts(service, tree):
    plan = media_plan(service, tree)
    with another_process_holding_the_plan(service.engine) as other:
        started = service.execute(plan, wait=False)
        time.sleep(0.5)
        assert service.cancel(started["execution_id"])
        done = service.wait(started["execution_id"], timeout=10)  # gives up waiting at once: the other still runs
        assert done["status"] == "error" and done["error_message"] == "cancelled before it started"
        assert done["outcomes_applied"] == 0 and job_status(service, started["execution_id"]) == "cancelled"
        assert other.poll() is None


class BlockingWork(flow_outcomes.OutcomeExecutor):
    """A classifier that holds the execution in its outcome until released."""

    type = "classifier"

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()

    def apply_rows(self, conn, outcome, rows, ctx):
        self.entered.set()
        assert self.release.wait(60)
        return flow_outcomes.BatchResult(applied=len(rows))


def test_a_running_execution_keeps_another_process_from_starting_the_plan(service, tree, monkeypatch):
    flow_outcomes.installed_executors()  # the real one registered first, so replacing it is undone afterwards
    work = BlockingWork()
    monkeypatch.setitem(flow_outcomes.EXECUTORS, "classifier", work)
    plan = media_plan(service, tree, conditions="media_type = image", outcomes=[{"type": "classifier"}])
    started = service.execute(plan, wait=False)
    try:
        assert work.entered.wait(60)
        probe = other_process(service.engine, "try")
        assert answer(probe) == "taken"
        probe.wait()
    finally:
        work.release.set()
    assert service.wait(started["execution_id"], timeout=60)["status"] == "success"
    probe = other_process(service.engine, "try")
    assert answer(probe) == "free"
    probe.wait()
    wait_for(lambda: job_status(service, started["execution_id"]) == "completed", what="the run's row")


class Stopped(BaseException):
    """What a SIGTERM becomes in a flow (Prefect's TerminationSignal) or a Ctrl-C: not an Exception."""


class StopHere(flow_outcomes.OutcomeExecutor):
    type = "classifier"

    def apply_rows(self, conn, outcome, rows, ctx):
        raise Stopped()


def test_an_execution_whose_process_is_stopped_ends_as_cancelled_and_frees_the_plan(service, tree, monkeypatch):
    flow_outcomes.installed_executors()
    monkeypatch.setitem(flow_outcomes.EXECUTORS, "classifier", StopHere())
    plan = media_plan(service, tree, conditions="media_type = image", outcomes=[{"type": "classifier"}])
    with pytest.raises(Stopped):
        service.execute(plan, wait=True)
    row = store_plans.list_executions(service.engine, plan_name="media", limit=1)[0][0]
    assert row["status"] == "error" and row["error_message"].startswith("cancelled: the process"), row
    assert job_status(service, row["execution_id"]) == "cancelled"
    probe = other_process(service.engine, "try")  # its lock went with it
    assert answer(probe) == "free"
    probe.wait()
