"""Plans as a service: create / update / delete them (checked, stored, written back to the plans directory), run
executions (as Prefect flows, in the background or in the caller's thread), and keep continuous plans watching.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from sqlalchemy.engine import Engine

from dsl.errors import PlanError, PlanValidationError, Problem
from dsl.model import Plan
from dsl.parse import locate_problems, parse_plan_text
from flows.core.roots import Roots
from flows.core.runner import JobRunner
from flows.plans.checks import check_plan, validated
from flows.plans.execution import open_execution, stored_plan
from flows.plans.flow import PLAN_JOBS
from flows.plans.preview import explain_path, preview_plan
from flows.plans.stages import DEFAULT_BATCH
from store import plans as store_plans
from store.engine import store_url
from store.errors import Conflict, InvalidInput, NotFound

log = logging.getLogger(__name__)


class PlanService:
    """Plans and their executions; executions run on the job runner (one ``plan`` job each, see
    :mod:`flows.plans.execution`)."""

    def __init__(self, engine: Engine, roots: Roots, *, use_prefect: bool = True, plans_dir: Any = None,
                 batch_size: int = DEFAULT_BATCH, id_batch_size: int | None = None,
                 runner: JobRunner | None = None) -> None:
        self.engine = engine
        self.roots = roots
        self.use_prefect = use_prefect
        self.plans_dir = plans_dir  # a flows.plans.files.PlansDirectory, or None
        self.batch_size = batch_size
        self.id_batch_size = id_batch_size
        self.runner = runner or JobRunner(engine, store_url(engine), use_prefect=use_prefect)
        self._owns_runner = runner is None
        self.watching: Any = None  # a flows.plans.watch.PlanWatchers, set by the app when watching is available
        self.deployments: Any = None  # flows.plans.deployments.PlanDeployments when the server serves them

    # -- definitions --

    def check(self, plan: Plan) -> Plan:
        return validated(plan, roots=self.roots)

    def load(self, name: str) -> Plan:
        """The stored plan; a plan from a file resolves relative source paths against the file's folder."""
        return stored_plan(self.engine, name)

    def save(self, plan: Plan, *, create: bool | None, origin_path: str | None = None,
             write_file: bool = True) -> dict[str, Any]:
        self.check(plan)
        row = store_plans.save_plan(self.engine, definition=plan.to_object(), create=create, origin_path=origin_path)
        if write_file and self.plans_dir is not None:
            path = self.plans_dir.write(plan)
            if path and row.get("origin_path") != path:
                row = store_plans.save_plan(self.engine, definition=plan.to_object(), create=False, origin_path=path)
        self._sync_watch(plan)
        if self.deployments is not None:
            self.deployments.sync(plan)
        return row

    def delete(self, name: str) -> dict[str, Any]:
        row = store_plans.delete_plan(self.engine, name=name)
        if self.watching is not None:
            self.watching.stop(name)
        if self.plans_dir is not None:
            self.plans_dir.remove(name, row.get("origin_path"))
        if self.deployments is not None:
            self.deployments.remove(name)
        return row

    def _sync_watch(self, plan: Plan) -> None:
        if self.watching is None:
            return
        if plan.status != "active" or not self.watching.wants(plan):
            self.watching.stop(plan.name)
        elif self.watching.is_watching(plan.name):
            self.watching.restart(plan)  # definition may have changed
        elif store_plans.list_executions(self.engine, plan_name=plan.name, limit=1)[1]:
            self.watching.ensure(plan)  # active again after a pause: catch up and watch, as it did before

    # -- executions --

    def execute(self, plan: Plan, *, wait: bool = False, trigger: str = "manual",
                restrict_ids: list[int] | None = None, scan: bool = True, use_prefect: bool | None = None,
                on_progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
        """Start an execution of ``plan``; returns its row at once (status running), or when done with ``wait``."""
        if plan.status != "active":
            raise Conflict(f"plan {plan.name!r} is {plan.status}, so it does not run; plan-update with status "
                           "active makes it runnable again", field="name")
        self.check(plan)
        execution_id, job_id = open_execution(
            self.engine, plan, trigger=trigger, roots=self.roots, restrict_ids=restrict_ids, scan=scan,
            batch_size=self.batch_size, id_batch_size=self.id_batch_size)
        prefect = self.use_prefect if use_prefect is None else use_prefect  # a runner without Prefect runs plainly

        def after(_job: dict[str, Any]) -> None:
            if plan.mode == "continuous" and trigger == "manual" and self.watching is not None:
                self.watching.ensure(plan)

        if wait:
            after(self.runner.run(PLAN_JOBS.name, job_id, on_progress=on_progress, use_prefect=prefect))
            return store_plans.get_execution(self.engine, execution_id=execution_id)
        self.runner.submit(PLAN_JOBS.name, job_id, on_progress=on_progress, after=after, use_prefect=prefect)
        return store_plans.get_execution(self.engine, execution_id=execution_id)

    def run_id(self, execution_id: int) -> int | None:
        """The run carrying execution ``execution_id``; None for an unknown execution."""
        try:
            return store_plans.run_of_execution(self.engine, execution_id=execution_id)
        except NotFound:
            return None

    def wait(self, execution_id: int, timeout: float | None = None) -> dict[str, Any]:
        job_id = self.run_id(execution_id)
        if job_id is not None and self.runner.is_running_here(job_id):
            self.runner.wait(job_id, timeout=timeout)
        return store_plans.get_execution(self.engine, execution_id=execution_id)

    def cancel(self, execution_id: int) -> bool:
        """Ask a running execution to stop (in this process or any other); False when it is not running."""
        job_id = self.run_id(execution_id)
        if job_id is None:
            return False
        return bool(self.runner.cancel(job_id).get("cancelled"))

    # -- previews --

    def preview(self, plan: Plan, *, samples: int = 5) -> dict[str, Any]:
        self.check(plan)
        return preview_plan(self.engine, plan, roots=self.roots, samples=samples)

    def explain(self, plan: Plan, path: str) -> dict[str, Any]:
        self.check(plan)
        return explain_path(self.engine, plan, roots=self.roots, path=path)

    def resume(self) -> None:
        """At server start: continuous plans that were running watch again (catching up on what changed)."""
        if self.watching is not None:
            self.watching.resume()

    def shutdown(self) -> None:
        if self.watching is not None:
            self.watching.shutdown()
        if self._owns_runner:
            self.runner.shutdown()


def validation_problems(make: Callable[[], Plan], roots: Roots, *, text: str | dict[str, Any] | None = None,
                        format: str = "auto") -> tuple[Plan | None, list[Problem]]:
    """Parse, then check what this installation can run; problems found after parsing get their line and column
    from ``text`` when the plan came as text."""
    try:
        plan = make()
    except PlanError as exc:
        return None, exc.problems or [Problem(exc.message)]
    problems = check_plan(plan, roots=roots)
    if problems and isinstance(text, str):
        problems = locate_problems(problems, text, format)
    return plan, problems


def require_valid(make: Callable[[], Plan], roots: Roots) -> Plan:
    plan, problems = validation_problems(make, roots)
    if problems:
        raise PlanValidationError(problems=problems)
    assert plan is not None
    return plan




# --- plans from tool arguments ------------------------------------------------------------------------------------

PLAN_FIELDS = ("name", "description", "mode", "status", "sources", "conditions", "outcomes", "rules", "preferences")


def plan_from_arguments(*, text: str | dict[str, Any] | None = None, format: str = "auto", **fields: Any) -> Plan:
    """A plan from plan-create style arguments: the reference's fields (name, sources, conditions, outcomes, ...),
    or ``text`` holding the whole plan as DSL, YAML or JSON (then ``name``, if given, must agree)."""
    given = {k: v for k, v in fields.items() if v is not None}
    if text is not None:
        plan = Plan.from_object(text) if isinstance(text, dict) else parse_plan_text(text, format=format)
        extra = [k for k in given if k != "name"]
        if extra:
            raise InvalidInput(f"give the plan either as text or as fields, not both (also got: {', '.join(extra)})",
                               field="text")
        if "name" in given and given["name"] != plan.name:
            raise InvalidInput(f"name {given['name']!r} differs from the name in the text ({plan.name!r})",
                               field="name")
        return plan
    if "name" not in given:
        raise InvalidInput("name is required (or give the whole plan as text)", field="name")
    return Plan.from_object(given)


def merge_update(current: Plan, *, text: str | dict[str, Any] | None = None, format: str = "auto",
                 **fields: Any) -> Plan:
    """plan-update: ``text`` replaces the definition; fields replace theirs. ``conditions`` / ``outcomes`` (the
    reference's one-rule form) replace the condition / outcomes of the rule named after the plan (creating it)."""
    given = {k: v for k, v in fields.items() if v is not None}
    if text is not None:
        if given:
            raise InvalidInput("text replaces the whole plan (its status and mode too); give either text or the "
                               f"fields to change, not both (also got: {', '.join(given)})", field="text")
        return plan_from_arguments(text=text, format=format, name=current.name).with_base_dir(current.base_dir)
    if not given:
        raise InvalidInput("nothing to update: give description, mode, status, sources, conditions, outcomes, "
                           "rules, preferences or text", field="name")
    data = current.to_object()
    for key in ("description", "mode", "status", "sources", "rules", "preferences"):
        if key in given:
            data[key] = given[key]
    if "conditions" in given or "outcomes" in given:
        rules = list(data.get("rules") or [])
        main = next((r for r in rules if r["name"] == current.name), None)
        if main is None and rules:
            raise InvalidInput(
                f"conditions and outcomes change the rule named after the plan ({current.name!r}), and this plan has "
                f"none: its rules are {', '.join(r['name'] for r in rules)}. Give rules (the whole list) or text "
                "instead", field="conditions" if "conditions" in given else "outcomes")
        if main is None:
            main = {"name": current.name, "outcomes": []}
            rules.insert(0, main)
        if "conditions" in given:
            main["when"] = given["conditions"]
        if "outcomes" in given:
            main["outcomes"] = given["outcomes"]
        data["rules"] = rules
    return Plan.from_object(data).with_base_dir(current.base_dir)
