"""`assay serve`: the MCP server over stdio or Streamable HTTP, with what runs beside it (Prefect, plan watchers,
the control socket that takes `assay index` calls)."""

from __future__ import annotations

import argparse
import logging
import os
import signal

import anyio

from flows.core import prefect
from flows.index.service import index_path
from flows.workers import spawn_only
from mcp_server.app import AssayApp, build_server
from mcp_server.cli.common import OK
from mcp_server.cli.parser import EPILOG
from mcp_server.cli.settings import settings_from
from mcp_server.guard.setup import check_exposure
from mcp_server.http import serve_http, transport_security

log = logging.getLogger("assay")


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    serve = sub.add_parser("serve", help=summary, description="Run the MCP server.", epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--transport", choices=["stdio", "http"], help="stdio (default) or http (Streamable HTTP)")
    serve.add_argument("--host", help="address to bind for http (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port for http (default 3000)")
    serve.add_argument("--allowed-hosts", metavar="H1,H2",
                       help="Host header values the http server accepts besides the loopback names (required when "
                            "--host is not a loopback address; '*': any)")
    serve.add_argument("--auth", action="store_true", default=None,
                       help="HTTP callers must present a bearer token: a local user's API token (assay tokens "
                            "create NAME) or, with guard.jwt_issuer, an identity provider's JWT")
    serve.add_argument("--allow-unauthenticated", action="store_true", default=None,
                       help="serve a non-loopback --host without --auth (only behind a proxy that checks callers)")
    serve.add_argument("--index", action="append", metavar="PATH", default=[],
                       help="index PATH (inside a root) in the background once the server starts (repeatable)")
    serve.add_argument("--tool-groups", metavar="G1,G2", help="only list these tool groups (default: all)")
    serve.add_argument("--plans-dir", metavar="DIR", help="load plan files from DIR, reload them on change, and "
                                                          "write plans created over MCP back to it")
    serve.add_argument("--work-pool", metavar="NAME",
                       help="run plan executions on this Prefect work pool, their outcome batches spread over its "
                            "workers (`assay worker --pool NAME` on each machine; made when missing)")
    serve.add_argument("--cache-dir", metavar="DIR",
                       help="the artifact cache, a folder every machine of the work pool shares (default: cache/ "
                            "in the data dir)")
    serve.add_argument("--no-prefect", action="store_true",
                       help="run jobs as plain functions instead of Prefect flows (no flow runs recorded)")
    serve.add_argument("--no-ui", action="store_true",
                       help="start Prefect's bare API, without its UI and background services (runs are recorded "
                            "and the deployments served all the same)")
    common(serve)
    return serve


def _split(value: str | None) -> list[str] | None:
    return [part.strip() for part in value.split(",") if part.strip()] if value else None


def _stop(signum, _frame) -> None:
    """SIGTERM ends the server as Ctrl-C does: watchers stopped, Prefect's server too."""
    raise KeyboardInterrupt


def _stopping(signum, _frame) -> None:
    """SIGTERM or Ctrl-C while the server stops: it is stopping (logged, not raised into the clean-up)."""
    log.info("signal %d: assay is stopping already", signum)


def run(args: argparse.Namespace) -> int:
    spawn_only()  # a library's multiprocessing.Process is spawned, not a fork of this threaded server (issue 21)

    settings = settings_from(args, transport=args.transport, host=args.host, port=args.port,
                             tool_groups=_split(args.tool_groups), allowed_hosts=_split(args.allowed_hosts),
                             use_prefect=False if args.no_prefect else None, plans_dir=args.plans_dir,
                             prefect_ui=False if args.no_ui else None, auth=args.auth,
                             allow_unauthenticated=args.allow_unauthenticated, work_pool=args.work_pool,
                             cache_dir=args.cache_dir)
    if settings.transport == "http":
        transport_security(settings)  # refuses an open non-loopback binding before anything starts
        check_exposure(settings)
    app = AssayApp.create(settings)
    try:
        mcp = build_server(app)
        signal.signal(signal.SIGTERM, _stop)
        if settings.use_prefect:
            prefect.configure(settings.data_dir, publish=True)  # `assay index` here reuses our Prefect API
        app.start_background()
        if app.sources is not None:
            app.sources.start_enabled()
        for path in args.index:
            result = index_path(app.runner, root=app.roots.resolve(os.path.abspath(path), field="--index"),
                                async_=True, max_age=0)
            log.info("indexing %s in the background (job %s)", path, result.get("jobId"))
        prefect_url = ""
        if settings.use_prefect:
            api = prefect.chosen_api_url(timeout=5.0)
            prefect_url = f"; Prefect {'UI' if settings.prefect_ui else 'API'} at " \
                          f"{prefect.ui_url(api) if settings.prefect_ui else api} (runs, deployments)" if api else ""
        log.info("assay serving over %s%s; store %s; roots %s%s", settings.transport,
                 f" at http://{settings.host}:{settings.port}/mcp" if settings.transport == "http" else "",
                 settings.db_url, app.roots.describe(), prefect_url)
        if settings.transport == "http":
            anyio.run(serve_http, mcp, settings)
        else:
            mcp.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):  # stopping already: a second signal (a client's kill of the
            signal.signal(sig, _stopping)  # process group) must not cut app.close() short; SIGKILL still ends us
        app.close()
    return OK
