"""`assay plan validate|run|preview|explain|show|schema`: plans from files (YAML, JSON, DSL) or the store, on the
command line, through the app's plan service as the plan tools use it (flows/plans/service.py); results on
stdout, the progress of a run on stderr."""

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
from dsl.parse import parse_plan_file, parse_plan_text
from dsl.printer import plan_to_dsl, plan_to_yaml
from dsl.schema import plan_json_schema
from flows.plans.service import validation_problems
from mcp_server.cli.app import open_app
from mcp_server.cli.common import ERROR, NOTHING, OK, out, say, settings_from
from store import plans as store_plans
from store.errors import NotFound

PLAN_HELP = "a plan file (.yaml, .yml, .json, .plan DSL), - for standard input, or the name of a stored plan"


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    plan = sub.add_parser("plan", help=summary,
                          description="Work with plans: files in YAML / JSON / DSL, or plans stored by the server.")
    psub = plan.add_subparsers(dest="plan_command", metavar="ACTION", required=True)

    v = psub.add_parser("validate", help="check plan files; every problem with its line and column")
    v.add_argument("plans", nargs="+", metavar="PLAN", help=PLAN_HELP)
    common(v)

    r = psub.add_parser("run", help="run a plan once, as a Prefect flow, with a progress line")
    r.add_argument("plan", metavar="PLAN", help=PLAN_HELP)
    r.add_argument("--no-prefect", action="store_true", help="run as plain functions, not a Prefect flow")
    r.add_argument("--save", action="store_true", help="store the plan (as plan-create would) before running it")
    common(r)

    p = psub.add_parser("preview", help="what a plan would do, changing nothing")
    p.add_argument("plan", metavar="PLAN", help=PLAN_HELP)
    p.add_argument("--samples", type=int, default=5, help="sample entries per rule (default 5)")
    common(p)

    e = psub.add_parser("explain", help="why a plan does or does not act on one path")
    e.add_argument("plan", metavar="PLAN", help=PLAN_HELP)
    e.add_argument("path", help="an indexed file or directory")
    common(e)

    s = psub.add_parser("show", help="print a plan in canonical form")
    s.add_argument("plan", metavar="PLAN", help=PLAN_HELP)
    s.add_argument("--format", choices=["yaml", "dsl", "json"], default="yaml")
    common(s)

    sc = psub.add_parser("schema", help="print the JSON Schema of plan files (for editors)")
    common(sc)
    return plan


def run(args: argparse.Namespace) -> int:
    action = args.plan_command
    if action == "schema":
        out(json.dumps(plan_json_schema(), indent=2))
        return OK
    if action == "show":
        return show(args)
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


def read_plan(spec: str, app: Any = None) -> Any:
    """The plan ``spec`` names: ``-`` (standard input), a plan file, or (given the app) a stored plan's name."""
    if spec == "-":
        return parse_plan_text(sys.stdin.read(), source="<stdin>")
    path = Path(spec).expanduser()
    if path.exists():
        return parse_plan_file(path).with_base_dir(str(path.resolve().parent))
    if app is not None:
        row = store_plans.find_plan(app.engine, name=spec)
        if row is not None:
            return Plan.model_validate(row["definition"])
    raise NotFound(f"{spec} is neither a plan file nor a stored plan")


def validate(app: Any, specs: list[str]) -> int:
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


def show(args: argparse.Namespace) -> int:
    """The plan in canonical YAML, DSL or JSON."""
    plan = read_plan(args.plan)
    text = {"yaml": lambda: plan_to_yaml(plan), "dsl": lambda: plan_to_dsl(plan),
            "json": lambda: json.dumps(plan.to_object(), indent=2) + "\n"}[args.format]()
    print(text, end="")
    return OK


def execute(app: Any, plan: Any, *, save: bool) -> int:
    """Run the plan once (stored first when --save, or when no plan of its name is), the progress on stderr."""
    app.plans.check(plan)
    if save or store_plans.find_plan(app.engine, name=plan.name) is None:
        app.plans.save(plan, create=None)
    started = time.monotonic()

    def progress(p: dict) -> None:
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
