"""`assay plan validate|run|preview|explain|show|schema`: plans from files (YAML, JSON, DSL) or the store, on the
command line, through the app's plan service as the plan tools use it (flows/plans/service.py); results on
stdout, the progress of a run on stderr.

``show`` and ``schema`` need only the plan language (dsl/) and run here; the actions on the store (validate, run,
preview, explain) are in mcp_server/cli/plan_app.py, named in the command table and loaded only for them: they open
the app (the store, Prefect, the MCP SDK), which printing a plan file has no use for."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dsl.model import Plan
from dsl.parse import parse_plan_file, parse_plan_text
from dsl.printer import plan_to_dsl, plan_to_yaml
from dsl.schema import plan_json_schema
from mcp_server.cli.commands import with_app
from mcp_server.cli.common import OK, out
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
    status: int = with_app("plan")(args)
    return status


def read_plan_file(spec: str) -> Plan | None:
    """The plan of ``spec`` when it is ``-`` (standard input) or a plan file; None when it is neither."""
    if spec == "-":
        return parse_plan_text(sys.stdin.read(), source="<stdin>")
    path = Path(spec).expanduser()
    if path.exists():
        return parse_plan_file(path).with_base_dir(str(path.resolve().parent))
    return None


def show(args: argparse.Namespace) -> int:
    """The plan in canonical YAML, DSL or JSON."""
    plan = read_plan_file(args.plan)
    if plan is None:
        raise NotFound(f"{args.plan} is neither a plan file nor a stored plan")
    text = {"yaml": lambda: plan_to_yaml(plan), "dsl": lambda: plan_to_dsl(plan),
            "json": lambda: json.dumps(plan.to_object(), indent=2) + "\n"}[args.format]()
    print(text, end="")
    return OK
