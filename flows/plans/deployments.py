"""A plan's deployment: each stored plan is a deployment of the ``assay-plan`` flow named after the plan (parameters:
the plan's name), created when the server starts or the plan is made, updated when it changes, deleted with it; a
paused or disabled plan's deployment is paused. In Prefect's UI a person opens it, presses Run, sees the run and
retries it when it failed; the run does what plan-execute does. A plan's ``schedule`` is its deployment's schedule
(:mod:`flows.plans.schedules`): Prefect's scheduler starts those runs, and pausing the plan pauses them.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.engine import Engine

from dsl.model import Plan
from flows.core.deployments import DeploymentSpec, DeploymentTarget, cancel_waiting_runs
from flows.plans.flow import plan_flow
from flows.plans.schedules import plan_schedules
from store import plans as store_plans

log = logging.getLogger(__name__)


def plan_deployment(plan: Plan) -> DeploymentSpec:
    """``plan``'s deployment: paused unless the plan is active, with the plan's schedule (or none)."""
    description = plan.description or f"assay plan {plan.name}"
    return DeploymentSpec(plan_flow, plan.name, {"plan_name": plan.name}, description, plan.status != "active",
                          plan_schedules(plan))


class PlanDeployments:
    """The plans' deployments, served by this process's Runner or on a work pool."""

    def __init__(self, engine: Engine, deployments: DeploymentTarget) -> None:
        self.engine = engine
        self.deployments = deployments

    def initial(self) -> list[DeploymentSpec]:
        """The deployments of every stored plan (for the Runner's start)."""
        out = []
        for row in store_plans.list_plans(self.engine):
            try:
                out.append(plan_deployment(Plan.model_validate(row["definition"])))
            except Exception:  # noqa: BLE001 (a plan stored by an older version that no longer validates)
                log.warning("plan %s: no deployment (its definition does not validate)", row["name"], exc_info=True)
        return out

    def sync(self, plan: Plan) -> None:
        """Create or update ``plan``'s deployment; a plan no longer active has its waiting runs cancelled."""
        try:
            self.deployments.add(*plan_deployment(plan))
            deployment_id = self.deployment_id(plan.name)
            if plan.status != "active" and deployment_id is not None:
                if cancelled := cancel_waiting_runs(deployment_id, f"plan {plan.name} is {plan.status}"):
                    log.info("plan %s is %s: %d waiting run(s) cancelled", plan.name, plan.status, cancelled)
        except Exception:  # noqa: BLE001 (the plan is saved; only the UI's view of it lags)
            log.warning("plan %s: updating its deployment failed", plan.name, exc_info=True)

    def remove(self, name: str) -> None:
        self.deployments.remove(plan_flow, name)

    def deployment_id(self, name: str) -> Any:
        return self.deployments.deployment_id(plan_flow, name)
