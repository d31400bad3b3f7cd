"""A plan's deployment: each stored plan is a deployment of the ``assay-plan`` flow named after the plan (parameters:
the plan's name), created when the server starts or the plan is made, updated when it changes, deleted with it; a
paused or disabled plan's deployment is paused. In Prefect's UI a person opens it, presses Run, sees the run and
retries it when it failed; the run does what plan-execute does.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy.engine import Engine

from dsl.model import Plan
from flows.core.deployments import Deployments, DeploymentSpec
from flows.plans.flow import plan_flow
from store import plans as store_plans

log = logging.getLogger(__name__)


def plan_deployment(plan: Plan) -> DeploymentSpec:
    """(flow, deployment name, default parameters, description, paused) of ``plan``'s deployment."""
    description = plan.description or f"assay plan {plan.name}"
    return plan_flow, plan.name, {"plan_name": plan.name}, description, plan.status != "active"


class PlanDeployments:
    """The plans' deployments on a :class:`~flows.core.deployments.Deployments`."""

    def __init__(self, engine: Engine, deployments: Deployments) -> None:
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
        """Create or update ``plan``'s deployment."""
        try:
            self.deployments.add(*plan_deployment(plan))
        except Exception:  # noqa: BLE001 (the plan is saved; only the UI's view of it lags)
            log.warning("plan %s: updating its deployment failed", plan.name, exc_info=True)

    def remove(self, name: str) -> None:
        self.deployments.remove(plan_flow, name)

    def deployment_id(self, name: str) -> Any:
        return self.deployments.deployment_id(plan_flow, name)
