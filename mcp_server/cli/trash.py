"""`assay trash list` and `assay trash empty`: what assay put in the trash, and deleting it for good — as the tools
``trash-list`` and ``trash-empty`` do (flows.fileops.emptying). Only what assay trashed is listed or emptied, never
the desktop's own trashed files; ``empty`` needs a choice (``--operation``, ``--path``, ``--older-than``) or
``--all``, and ``--dry-run`` says what would go.

It needs the store, not the server (``--database-url``, the environment, ``--config``). Exit status 0 on success
(``list``: something listed), 1 when nothing was listed or some item failed, 2 on bad input.
"""

from __future__ import annotations

import argparse
import json
import os
from typing import Any

from flows.fileops.emptying import MAX_LIST, empty, listing
from mcp_server.cli.common import ERROR, NOTHING, OK, out, say
from mcp_server.cli.settings import settings_from
from mcp_server.cli.users import table
from store.engine import get_engine
from store.errors import AssayError

EPILOG = """examples:
  assay trash list                            # what assay trashed, oldest first
  assay trash list --older-than 7             # ... that has been there more than a week
  assay trash empty --older-than 30 --dry-run # what emptying a month's worth would delete
  assay trash empty --operation 41 --operation 42
  assay trash empty --all                     # everything assay trashed (never the desktop's own)"""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    p = sub.add_parser("trash", help=summary, epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="List what assay put in the trash, or delete it for good.")
    p.add_argument("action", choices=("list", "empty"), help="list, or empty (delete for good)")
    p.add_argument("--path", metavar="PATH", help="only what was trashed from PATH or under it")
    p.add_argument("--older-than", type=float, metavar="DAYS", help="only what has been there more than DAYS days")
    p.add_argument("--operation", type=int, action="append", metavar="N",
                   help="empty: this trashed item (its operation id; repeat for more)")
    p.add_argument("--all", action="store_true", help="empty: everything assay trashed")
    p.add_argument("--dry-run", action="store_true", help="empty: say what would be deleted; delete nothing")
    p.add_argument("--limit", type=int, default=MAX_LIST, help=f"list: at most this many (1-{MAX_LIST})")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    common(p)
    return p


def run(args: argparse.Namespace) -> int:
    if args.action == "list" and (args.operation or args.all or args.dry_run):
        say("assay trash list: --operation, --all and --dry-run are for `assay trash empty`")
        return ERROR
    path = os.path.abspath(os.path.expanduser(args.path)) if args.path else None
    engine = get_engine(settings_from(args).db_url)
    try:
        if args.action == "list":
            result = listing(engine, path=path, older_than_days=args.older_than, limit=args.limit)
        else:
            result = empty(engine, operation_ids=args.operation, path=path, older_than_days=args.older_than,
                           everything=args.all, dry_run=args.dry_run, by="assay trash empty")
    except AssayError as exc:
        say(f"assay trash {args.action}: {exc}")
        return ERROR
    finally:
        engine.dispose()
    if args.action == "list":
        out(json.dumps(result, indent=2) if args.json else render_list(result))
        return OK if result["items"] else NOTHING
    out(json.dumps(result, indent=2) if args.json else render_empty(result))
    return NOTHING if result["errorCount"] else OK


def _size(n: int | None) -> str:
    return "-" if n is None else f"{n:,}"


def render_list(result: dict[str, Any]) -> list[str]:
    head = f"{result['count']} item(s) in the trash{' (more: raise --limit)' if result['hasMore'] else ''}; " \
           f"{result['retention']}"
    rows = [(str(i["operationId"]), i["trashedAt"] or "", _size(i["size"]), i["path"],
             i["trashedTo"] if i["inTrash"] else f"({i['note']})") for i in result["items"]]
    return [head, "", *table(("OP", "TRASHED (UTC)", "BYTES", "FROM", "NOW AT"), rows)] if rows else [head]


def render_empty(result: dict[str, Any]) -> list[str]:
    verb = "would delete" if result["dryRun"] else "deleted"
    head = (f"{verb} {len(result['results']) if result['dryRun'] else result['purgedCount']} item(s), "
            f"{_size(result['bytesFreed'])} bytes; {result['errorCount']} failed, {result['skippedCount']} skipped")
    rows = [(str(r["operationId"]), r["status"], _size(r["bytesFreed"]), r["path"], r["error"] or "")
            for r in result["results"]]
    return [head, "", *table(("OP", "STATUS", "BYTES", "FROM", "WHY"), rows)] if rows else [head]
