"""`assay classify PATH`: thumbnails, timelines, metadata and hashes of indexed files, as the ``classify`` tool
runs them (flows/classify/service.py ``classify_path``), with a progress bar on stderr and a summary on stdout;
handed to an `assay serve` on the same data dir when one takes it (its worker pool and Prefect are warm), else run
here by mcp_server/cli/local.py (loaded through the command table then)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from flows.classify.model import check_operations
from mcp_server.cli import handoff
from mcp_server.cli.commands import with_app
from mcp_server.cli.common import NOTHING, OK, end_bar, out, progress_bar
from mcp_server.cli.settings import confined, settings_from

log = logging.getLogger("assay")


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    classify = sub.add_parser("classify", help=summary,
                              description="Classify the indexed files at PATH (a file, or every file under a "
                                          "directory) and print a summary. Index PATH first.")
    classify.add_argument("path", help="indexed file or directory")
    classify.add_argument("--operations", nargs="+", metavar="OP", default=None,
                          help="thumbnail, timeline, metadata, hash, all (default: all)")
    classify.add_argument("--force", action="store_true",
                          help="redo work already done on unchanged files (default: skip it)")
    classify.add_argument("--no-prefect", action="store_true", help="run as a plain function, not a Prefect flow")
    common(classify)
    return classify


def classify_bar():
    """The bar of a classify job (dict reports: percent, files, total, errors)."""
    return progress_bar(lambda p: p["percent"],
                        lambda p: f"{p['files']}/{p['total']} files  {p['errors']} with errors")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args, use_prefect=not args.no_prefect)
    path = confined(settings, args.path)
    operations = check_operations(args.operations)
    result = _via_server(settings, path, list(operations), args) if settings.use_prefect else None
    if result is None:
        result = with_app("classify")(settings, path, operations, args)
    end_bar()
    out(summary(result))
    return OK if result["status"] == "completed" else NOTHING


def summary(result: dict[str, Any]) -> list[str]:
    """What `assay classify` prints: the counts, then each file that failed and the job's error."""
    lines = [(f"{result['status']}: {result['files']} files, {result['errors']} with errors, "
              f"operations {', '.join(result['operations'])}, in {result['durationMs']} ms (job {result['id']})")]
    lines.extend(f"  {issue['path']}: {issue['reason']}" for issue in result.get("issues") or [])
    if result.get("error"):
        lines.append(f"  {result['error']}")
    return lines


def _via_server(settings, path: str, operations: list[str], args: argparse.Namespace) -> dict | None:
    """classify_path's result from the `assay serve` on this data dir, or None when no server takes the job."""
    def accepted(where: str, info: dict) -> None:
        log.info("classification handed to the assay server at %s (pid %s)", where, info.get("pid"))

    try:
        return handoff.classify_via_server(settings.data_dir, path=path, operations=operations, force=args.force,
                                           store=settings.db_url, on_progress=classify_bar(), on_accepted=accepted)
    except handoff.NoServer as why:
        log.log(logging.INFO if why.refused else logging.DEBUG, "classifying here: %s", why)
        return None
