"""The `assay plan` actions on the store: validate, run, preview, explain, through the app's plan service as the plan
tools use it (flows/plans/service.py). Named in the command table (mcp_server.cli.commands) and loaded by
mcp_server/cli/plan.py only for these actions: they open the app, which `assay plan show` and `schema` need not."""

from __future__ import annotations

import argparse
import json
import sys
import time
from functools import partial
from pathlib import Path
from typing import Any

from dsl.errors import PlanError
from dsl.model import Plan
from flows.plans.service import validation_problems
from mcp_server.app import AssayApp
from mcp_server.cli.app import open_app
from mcp_server.cli.common import ERROR, NOTHING, OK, out, say
from mcp_server.cli.plan import read_plan_file
from mcp_server.cli.settings import settings_from
from store import plans as store_plans
from store.errors import NotFound


def run(args: argparse.Namespace) -> int:
    action = args.plan_command
    no_prefect = action == "run" and args.no_prefect
    with open_app(settings_from(args, use_prefect=not no_prefect), plans_dir=True) as app:
        try:
            if action == "validate":
                return validate(app, args.plans)
            plan = read_plan(args.plan, app)
            if action == "preview":
                out(json.dumps(app.plans.preview(plan, samples=args.samples), indent=2))
                return OK
            if action == "explain":
                out(json.dumps(app.plans.explain(plan, args.path), indent=2))
                return OK
            return execute(app, plan, save=args.save)
        except PlanError as exc:
            if action == "validate":
                raise
            say(f"assay: {exc}")
            return ERROR


def read_plan(spec: str, app: AssayApp) -> Plan:
    """The plan ``spec`` names: ``-`` (standard input), a plan file, or a stored plan's name."""
    plan = read_plan_file(spec)
    if plan is not None:
        return plan
    row = store_plans.find_plan(app.engine, name=spec)
    if row is not None:
        return Plan.model_validate(row["definition"])
    raise NotFound(f"{spec} is neither a plan file nor a stored plan")


def validate(app: AssayApp, specs: list[str]) -> int:
    """Every problem of every plan, with its place; NOTHING when one has any."""
    status = OK
    for spec in specs:
        path = Path(spec).expanduser()
        text = path.read_text() if path.is_file() else None
        fmt = {".plan": "dsl", ".json": "json"}.get(path.suffix, "yaml") if text is not None else "auto"
        plan, problems = validation_problems(partial(read_plan, spec, app), app.roots, text=text, format=fmt)
        if problems:
            status = NOTHING
            out(f"{spec}: {len(problems)} problem(s)")
            out("  " + problem.render().replace("\n", "\n  ") for problem in problems)
        else:
            assert plan is not None  # no problems: it parsed
            out(f"{spec}: ok (plan {plan.name}: {len(plan.sources)} source(s), {len(plan.rules)} rule(s))")
    return status


def execute(app: AssayApp, plan: Plan, *, save: bool) -> int:
    """Run the plan once (stored first when --save, or when no plan of its name is), the progress on stderr."""
    app.plans.check(plan)
    if save or store_plans.find_plan(app.engine, name=plan.name) is None:
        app.plans.save(plan, create=None)
    started = time.monotonic()

    def progress(p: dict[str, Any]) -> None:
        width = 30
        filled = int(width * p["percent"] / 100)
        sys.stderr.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {p['percent']:5.1f}%  "
                         f"{time.monotonic() - started:6.1f}s  {p['stage'][:40]:<40}  "
                         f"{p['outcomes_applied']} outcomes applied")
        sys.stderr.flush()

    row = app.plans.execute(plan, wait=True, trigger="cli", on_progress=progress)
    sys.stderr.write("\n")
    out(f"{row['status']}: {row['entries_processed']} entries processed, {row['entries_matched']} matched, "
        f"{row['outcomes_applied']} outcomes applied, in {row['duration_ms']} ms "
        f"(plan {plan.name}, execution {row['execution_id']})")
    for name, rule in (row.get("summary") or {}).get("rules", {}).items():
        outs = ", ".join(f"{o['type']} {o['applied']}" for o in rule.get("outcomes", []))
        out(f"  rule {name}: {rule.get('matched')} matched" + (f"; {outs}" if outs else ""))
    if row.get("error_message"):
        out(f"  {row['error_message']}")
    return OK if row["status"] in ("success", "partial") else NOTHING
