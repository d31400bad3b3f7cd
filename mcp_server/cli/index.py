"""`assay index PATH`: index a path as the ``index`` tool does (flows/index/service.py ``index_path``), with a
progress bar on stderr and a summary on stdout. Beside an `assay serve` on the same data dir the job is handed to
that server (mcp_server/cli/handoff.py), which runs it with Prefect warm; this process then loads neither Prefect
nor the store. Only when no server takes the job is it run here, by mcp_server/cli/local.py (loaded through the
command table then, not imported here)."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from mcp_server.cli import handoff
from mcp_server.cli.commands import with_app
from mcp_server.cli.common import NOTHING, OK, end_bar, out, progress_bar
from mcp_server.cli.settings import confined, settings_from

log = logging.getLogger("assay")


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    index = sub.add_parser("index", help=summary,
                           description="Index PATH into the store (as a Prefect flow) and print a summary.")
    index.add_argument("path", help="file or directory to index")
    index.add_argument("--force", action="store_true", help="re-index even if scanned within --max-age")
    index.add_argument("--max-age", type=float, default=0, metavar="SECONDS",
                       help="skip if scanned this recently (default 0: always index)")
    index.add_argument("--follow-symlinks", action="store_true", help="follow symbolic links (off by default)")
    index.add_argument("--no-prefect", action="store_true", help="run as a plain function, not a Prefect flow")
    common(index)
    return index


def index_bar():
    """The bar of an index job (IndexProgress reports, or the hand-off's Progress)."""
    return progress_bar(lambda p: p.percent,
                        lambda p: f"{p.files} files  {p.directories} dirs  {p.total_size / 1e6:,.1f} MB")


def run(args: argparse.Namespace) -> int:
    settings = settings_from(args, use_prefect=not args.no_prefect)
    root = confined(settings, args.path)
    result = _via_server(settings, root, args) if settings.use_prefect else None
    if result is None:
        result = with_app("index")(settings, root, args)
    end_bar()
    if result.get("skipped"):
        out(result["skipReason"])
        return OK
    out(summary(result))
    return OK if result["status"] == "completed" else NOTHING


def summary(result: dict[str, Any]) -> list[str]:
    """What `assay index` prints: the counts, then each path skipped and the job's error."""
    lines = [(f"{result['status']}: {result['files']} files, {result['directories']} directories, "
              f"{result['totalSize']:,} bytes, {result['removed']} removed, in {result['durationMs']} ms "
              f"(job {result['jobId']})")]
    lines.extend(f"  skipped {issue['path']}: {issue['reason']}" for issue in result.get("issues") or [])
    if result.get("error"):
        lines.append(f"  {result['error']}")
    return lines


def _via_server(settings, root: str, args: argparse.Namespace) -> dict | None:
    """index_path's result from the `assay serve` on this data dir, or None when no server takes the job."""
    def accepted(where: str, info: dict) -> None:
        log.info("indexing handed to the assay server at %s (pid %s)", where, info.get("pid"))

    try:
        return handoff.index_via_server(settings.data_dir, path=root, force=args.force, max_age=args.max_age,
                                        follow_symlinks=args.follow_symlinks, store=settings.db_url,
                                        on_progress=index_bar(), on_accepted=accepted)
    except handoff.NoServer as why:
        log.log(logging.INFO if why.refused else logging.DEBUG, "indexing here: %s", why)
        return None
