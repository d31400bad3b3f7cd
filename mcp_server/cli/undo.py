"""`assay undo`: reverse file operations from the journal — one operation (``--operation N``), a whole tool call
(``--call ID``, the ``callId`` a file tool answered) or a whole plan execution (``--execution N``) — as the ``undo``
tool does (flows.fileops.undo): moves and renames go back, copies are removed, trashed files return; each file that
changed since, is gone, or whose old place is taken is refused with the reason. ``--dry-run`` says what would happen.
``assay undo --history PATH`` lists the journal for a path instead.

It needs the store and the roots, not the server: the store from the settings (``--database-url``, the environment,
``--config``), the roots from ``--root`` / ``ASSAY_ROOTS``. Exit status 0 when everything asked was reversed (or
would be), 1 when some operation was refused, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from flows.core.roots import Roots
from flows.fileops.undo import undo
from mcp_server.cli.common import ERROR, NOTHING, OK, out, say
from mcp_server.cli.settings import settings_from
from mcp_server.cli.users import table
from store import file_journal
from store.engine import get_engine
from store.errors import AssayError

EPILOG = """examples:
  assay undo --execution 12 --dry-run         # what undoing plan execution 12 would do
  assay undo --execution 12                   # put its files back
  assay undo --call 5f6da49c545c45908c0d87833dece063   # a move-files / rename-files / delete-files call
  assay undo --history ~/Documents/report.pdf  # the journal of a path (moves in and out of it)"""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    p = sub.add_parser("undo", help=summary, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Reverse file operations from the journal: one operation, a tool call or a plan "
                                   "execution.")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--operation", type=int, metavar="N", help="one operation (file-history lists their ids)")
    which.add_argument("--call", metavar="ID", help="every operation of one tool call (its callId)")
    which.add_argument("--execution", type=int, metavar="N", help="every file operation of one plan execution")
    which.add_argument("--history", metavar="PATH", help="list the journal for PATH instead (nothing is changed)")
    p.add_argument("--dry-run", action="store_true", help="say what would be reversed or refused; change nothing")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    common(p)
    return p


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    engine = get_engine(settings.db_url)
    try:
        if args.history:
            rows = file_journal.history(engine, path=args.history, limit=1000)
            out(json.dumps(rows, indent=2, default=str) if args.json else render_history(rows))
            return OK if rows else NOTHING
        roots = Roots.of(settings.effective_roots)
        result = undo(engine, roots, origin=file_journal.Origin.for_tool("undo"), operation_id=args.operation,
                      call_id=args.call, execution_id=args.execution, dry_run=args.dry_run)
    except AssayError as exc:
        say(f"assay undo: {exc}")
        return ERROR
    finally:
        engine.dispose()
    out(json.dumps(result, indent=2) if args.json else render(result))
    return NOTHING if result["refused"] else OK


def render(result: dict[str, Any]) -> list[str]:
    verb = "would undo" if result["dryRun"] else "undone"
    done = result["wouldUndo"] if result["dryRun"] else result["undone"]
    lines = [f"{done} operation(s) {verb}, {result['refused']} refused"]
    rows = [(str(r["operationId"]), r["op"], r["status"], f"{r['from']} -> {r['to']}", r.get("reason") or "")
            for r in result["results"]]
    return lines + ["", *table(("OP", "KIND", "STATUS", "FILE", "WHY"), rows)] if rows else lines


def render_history(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["the journal has no operation on that path"]
    shown = [file_journal.operation_public(r) for r in rows]
    return table(("OP", "WHEN (UTC)", "KIND", "STATE", "FROM", "TO", "BY"),
                 [(str(r["id"]), r["time"] or "", r["op"], r["state"], r["from"], r["to"] or "-",
                   r["tool"] or (f"execution {r['executionId']}" if r["executionId"] else "-")) for r in shown])
