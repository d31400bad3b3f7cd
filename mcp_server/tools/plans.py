"""Plan management tools of reference 000 (plan-create, plan-execute, plan-list, plan-get, plan-update,
plan-delete) and the ones agents need to write plans well: plan-validate, plan-preview, plan-explain."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, Field

from dsl.errors import PlanValidationError
from dsl.model import Plan
from dsl.parse import locate_problems
from dsl.printer import plan_to_dsl, plan_to_yaml
from flows.core.roots import current_limit
from flows.plans.service import merge_update, plan_from_arguments, validation_problems
from mcp_server.tools.common import DESTRUCTIVE, IDEMPOTENT_WRITE, READ_ONLY, WRITES, McpProgress, ToolSet, tool
from store import plans as store_plans
from store.errors import AssayError, InvalidInput, NotFound

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

PlanName = Annotated[str, Field(description="Plan name")]
Sources = Annotated[list[dict[str, Any]] | None, Field(
    description="Array of PlanSource objects: {name, type: filesystem.index|filesystem.watch|selection_set|query, "
                "target_set, config: {path, recursive, exclude, debounce_ms, ...}}")]
Conditions = Annotated[dict[str, Any] | str | None, Field(
    description="RuleCondition tree ({type: all|any|none|media_type|size|time|path, ...}) or an expression such as "
                "\"media_type = video and size > 1GB\"")]
Outcomes = Annotated[list[dict[str, Any]] | None, Field(
    description="Array of RuleOutcome objects: {type: selection_set, selectionSetName, operation: add|remove}, "
                "{type: chained, outcomes, stopOnError}")]
Rules = Annotated[list[dict[str, Any]] | None, Field(
    description="Several rules, each {name, when, outcomes} (instead of conditions + outcomes)")]
# dict too: the SDK hands JSON text over already parsed when a parameter is not plainly `str`
Text = Annotated[str | dict[str, Any] | None, Field(
    description="The whole plan as DSL, YAML or JSON text (instead of the fields)")]
Format = Annotated[Literal["auto", "dsl", "yaml", "json"], Field(description="Format of text (auto detects)")]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class PlanInfo(_Open):
    name: str
    description: str | None
    mode: str
    status: str
    sources: list[dict[str, Any]]
    rules: list[dict[str, Any]]
    created_at: str | None = None
    updated_at: str | None = None
    origin_path: str | None = None


class Execution(_Open):
    execution_id: int
    plan_name: str
    status: str
    started_at: int


class PlanDetail(PlanInfo):
    executions: list[Execution] | None = None
    execution_total: int | None = None
    text: str | None = None


class PlanList(BaseModel):
    plans: list[PlanInfo]
    total: int
    file_errors: list[dict[str, Any]] = Field(default_factory=list,
                                              description="plan files in the plans directory that could not be loaded")


class DeleteResponse(BaseModel):
    name: str
    deleted: bool
    executions_removed: int


class ValidateResponse(BaseModel):
    valid: bool
    problems: list[dict[str, Any]]
    plan: dict[str, Any] | None = None
    yaml: str | None = None
    dsl: str | None = None


def _info(row: dict[str, Any], *, last: dict[str, Any] | None = None) -> dict[str, Any]:
    d = row["definition"]
    out = {"name": row["name"], "description": row["description"], "mode": row["mode"], "status": row["status"],
           "sources": d.get("sources", []), "rules": d.get("rules", []), "preferences": d.get("preferences", {}),
           "created_at": row["created_at"], "updated_at": row["updated_at"], "origin_path": row["origin_path"]}
    if last is not None:
        out["last_execution"] = last
    return out


def _save(service, plan: Plan, *, create: bool, text, format: str) -> dict[str, Any]:
    """Save (checked); problems found by the check get their line and column from the plan's text, if any."""
    try:
        return service.save(plan, create=create)
    except PlanValidationError as exc:
        if isinstance(text, str):
            locate_problems(exc.problems, text, format)
            exc.message = exc.summary()
            exc.args = (exc.message,)
        raise


def reachable(app: AssayApp, plan: Plan) -> bool:
    """Whether the current caller may use ``plan``: always, unless it is a user limited to some roots, who may use
    only plans whose sources are folders inside them (a set or query source may yield entries from anywhere)."""
    if current_limit() is None:
        return True
    for source in plan.sources:
        if not source.type.startswith("filesystem"):
            return False
        for path in source.config.paths:
            try:
                app.roots.resolve(path, field="path")
            except AssayError:
                return False
    return True


def register(tools: ToolSet, app: AssayApp) -> None:
    service = app.plans

    def load(name: str) -> Plan:
        """The saved plan ``name``, if the caller may use it (one it may not reads as one that does not exist)."""
        plan = service.load(name)
        if not reachable(app, plan):
            raise NotFound(f"no plan named {name!r}; plan-list shows the plans you may use", field="name")
        return plan

    def usable(plan: Plan) -> Plan:
        if not reachable(app, plan):
            raise InvalidInput(f"your user is limited to the roots {app.roots.describe()}: a plan's sources must be "
                               "filesystem sources inside them", field="sources")
        return plan

    @tool(tools, "plan-create", WRITES)
    def plan_create(
        name: Annotated[str | None, Field(description="Unique plan name (required unless text holds the plan)")] = None,
        description: Annotated[str | None, Field(description="Optional description")] = None,
        mode: Annotated[Literal["oneshot", "continuous"] | None, Field(
            description="oneshot (default) or continuous (keeps watching its sources)")] = None,
        sources: Sources = None,
        conditions: Conditions = None,
        outcomes: Outcomes = None,
        rules: Rules = None,
        preferences: Annotated[dict[str, Any] | None, Field(description="Plan preferences")] = None,
        text: Text = None,
        format: Format = "auto",
    ) -> PlanDetail:
        """Create a new plan: sources (where entries come from), conditions (which entries match) and outcomes (what
        happens to them). Give the reference's fields, several `rules`, or the whole plan as DSL / YAML / JSON
        `text`. The plan is checked completely first (every problem is reported with its place); plan-validate
        checks without saving, plan-preview shows what it would do, plan-execute runs it."""
        plan = plan_from_arguments(text=text, format=format, name=name, description=description, mode=mode,
                                   sources=sources, conditions=conditions, outcomes=outcomes, rules=rules,
                                   preferences=preferences)
        row = _save(service, usable(plan), create=True, text=text, format=format)
        return PlanDetail(**_info(row), text=plan_to_yaml(plan))

    @tool(tools, "plan-execute", WRITES)
    async def plan_execute(
        name: PlanName,
        ctx: Context,
        wait: Annotated[bool, Field(description="Wait for the execution to finish (with MCP progress) instead of "
                                                "returning at once")] = False,
    ) -> Execution:
        """Execute a plan: scan its filesystem sources (indexing them), match each rule, apply the outcomes, as one
        Prefect flow run. Returns at once with the execution id and status running (plan-get or
        synthesis://plans/{name}/executions follow it); wait=true returns the finished execution. A continuous plan
        keeps watching its sources afterwards."""
        plan = load(name)
        if not wait:
            return Execution(**service.execute(plan, wait=False))
        progress = McpProgress(ctx)

        def on_progress(p: dict) -> None:
            applied = p.get("outcomes_applied")  # not known while a work pool's worker runs it
            progress.update(p["percent"], p["stage"] if applied is None
                            else f"{p['stage']}: {applied} outcomes applied")

        row = await anyio.to_thread.run_sync(lambda: service.execute(plan, wait=True, on_progress=on_progress))
        await progress.finish(f"{row.get('status')}: {row.get('outcomes_applied') or 0} outcomes applied")
        return Execution(**row)

    @tool(tools, "plan-list", READ_ONLY)
    def plan_list() -> PlanList:
        """List all plans with their mode, status, sources, rules and last execution."""
        rows = store_plans.list_plans(app.engine)
        if current_limit() is not None:
            rows = [r for r in rows if reachable(app, Plan.model_validate(r["definition"]))]
        plans = []
        for row in rows:
            executions, _ = store_plans.list_executions(app.engine, plan_name=row["name"], limit=1)
            plans.append(PlanInfo(**_info(row, last=executions[0] if executions else None)))
        errors = service.plans_dir.errors() if service.plans_dir is not None else []
        return PlanList(plans=plans, total=len(plans), file_errors=errors)

    @tool(tools, "plan-get", READ_ONLY)
    def plan_get(
        name: PlanName,
        include_executions: Annotated[bool, Field(description="Include execution history")] = True,
        execution_limit: Annotated[int, Field(ge=1, le=1000, description="Max executions to return")] = 10,
        format: Annotated[Literal["yaml", "dsl", "json"], Field(description="Also return the plan as text in this "
                                                                            "format")] = "yaml",
    ) -> PlanDetail:
        """Get a specific plan with its execution history (newest first) and its text (YAML or DSL)."""
        load(name)
        row = store_plans.get_plan(app.engine, name=name)
        plan = Plan.model_validate(row["definition"])
        detail = _info(row)
        if include_executions:
            executions, total = store_plans.list_executions(app.engine, plan_name=name, limit=execution_limit)
            detail["executions"] = executions
            detail["execution_total"] = total
        detail["text"] = {"yaml": lambda: plan_to_yaml(plan), "dsl": lambda: plan_to_dsl(plan),
                          "json": lambda: json.dumps(plan.to_object(), indent=2)}[format]()
        return PlanDetail(**detail)

    @tool(tools, "plan-update", IDEMPOTENT_WRITE)
    def plan_update(
        name: PlanName,
        description: Annotated[str | None, Field(description="New description")] = None,
        mode: Annotated[Literal["oneshot", "continuous"] | None, Field(description="New mode")] = None,
        status: Annotated[Literal["active", "paused", "disabled"] | None,
                          Field(description="New status (active, paused, disabled); paused and disabled stop a "
                                            "continuous plan's watching")] = None,
        sources: Sources = None,
        conditions: Conditions = None,
        outcomes: Outcomes = None,
        rules: Rules = None,
        preferences: Annotated[dict[str, Any] | None, Field(description="New preferences")] = None,
        text: Text = None,
        format: Format = "auto",
    ) -> PlanDetail:
        """Modify a plan: the fields given replace theirs (conditions / outcomes replace those of the rule named
        after the plan); text replaces the whole definition. The result is checked before it is saved."""
        current = load(name)
        plan = merge_update(current, text=text, format=format, description=description, mode=mode, status=status,
                            sources=sources, conditions=conditions, outcomes=outcomes, rules=rules,
                            preferences=preferences)
        row = _save(service, usable(plan), create=False, text=text, format=format)
        return PlanDetail(**_info(row), text=plan_to_yaml(plan))

    @tool(tools, "plan-delete", DESTRUCTIVE)
    def plan_delete(name: PlanName) -> DeleteResponse:
        """Delete a plan with its execution history (its plan file too, when it came from the plans directory).
        Sets and entries its outcomes produced stay."""
        load(name)
        row = service.delete(name)
        return DeleteResponse(name=row["name"], deleted=True, executions_removed=row["executions_removed"])

    @tool(tools, "plan-validate", READ_ONLY)
    def plan_validate(
        name: Annotated[str | None, Field(description="Plan name")] = None,
        description: Annotated[str | None, Field(description="Description")] = None,
        mode: Annotated[str | None, Field(description="oneshot or continuous")] = None,
        sources: Sources = None,
        conditions: Conditions = None,
        outcomes: Outcomes = None,
        rules: Rules = None,
        preferences: Annotated[dict[str, Any] | None, Field(description="Preferences")] = None,
        text: Text = None,
        format: Format = "auto",
    ) -> ValidateResponse:
        """Check a plan without saving or running anything: every problem at once, each with its place (line and
        column for DSL text, the path of the key otherwise) and what would be accepted. A valid plan comes back in
        canonical form, as YAML and as DSL."""
        plan, problems = validation_problems(lambda: plan_from_arguments(
            text=text, format=format, name=name, description=description, mode=mode, sources=sources,
            conditions=conditions, outcomes=outcomes, rules=rules, preferences=preferences), app.roots,
            text=text, format=format)
        if problems or plan is None:  # no plan comes with its problems
            return ValidateResponse(valid=False, problems=[p.as_dict() | {"where": p.where} for p in problems])
        return ValidateResponse(valid=True, problems=[], plan=plan.to_object(), yaml=plan_to_yaml(plan),
                                dsl=plan_to_dsl(plan))

    def _plan_for(name: str | None, text: str | dict[str, Any] | None, format: str) -> Plan:
        if text is not None:
            return usable(plan_from_arguments(text=text, format=format))
        if name is None:
            raise InvalidInput("give name (a saved plan) or text (a plan to try)", field="name")
        return load(name)

    @tool(tools, "plan-preview", READ_ONLY)
    def plan_preview(
        name: Annotated[str | None, Field(description="A saved plan's name")] = None,
        text: Annotated[str | dict[str, Any] | None, Field(description="Or a plan as DSL / YAML / JSON text, not "
                                                                       "saved")] = None,
        format: Format = "auto",
        samples: Annotated[int, Field(ge=0, le=100, description="Sample entries per rule")] = 5,
    ) -> dict[str, Any]:
        """What a plan would do, changing nothing: per source the entries it yields, per rule the matches (count and
        samples) and what each outcome would change (e.g. entries a set would gain). Reads the index as it is:
        sources are not re-scanned."""
        return service.preview(_plan_for(name, text, format), samples=samples)

    @tool(tools, "plan-explain", READ_ONLY)
    def plan_explain(
        path: Annotated[str, Field(description="An indexed file or directory")],
        name: Annotated[str | None, Field(description="A saved plan's name")] = None,
        text: Annotated[str | dict[str, Any] | None, Field(description="Or a plan as DSL / YAML / JSON text, not "
                                                                       "saved")] = None,
        format: Format = "auto",
    ) -> dict[str, Any]:
        """Why a plan does or does not act on one entry: which sources yield it, and for each rule every condition
        node with the value it saw, the value it wanted, and pass/fail."""
        return service.explain(_plan_for(name, text, format), path)
