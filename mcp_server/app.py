"""Builds the MCP server: one AssayApp (settings, store engine, roots, job runner) shared by every tool group."""

from __future__ import annotations

import importlib
import logging
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp_types import InputRequiredResult
from pydantic import ValidationError
from sqlalchemy.engine import Engine

from flows.citations.service import CitationService
from flows.classify.service import classify_deployment
from flows.core import capability as capabilities
from flows.core import prefect
from flows.core.deployments import Deployments
from flows.core.pool import WorkPool
from flows.core.prefect import ui_url
from flows.core.roots import Roots
from flows.core.runner import JobRunner
from flows.core.settings import export_for_runs
from flows.documents import settings as doc_settings
from flows.index.flow import index_deployment
from flows.index.sources import SourceManager
from flows.plans.deployments import PlanDeployments
from flows.plans.files import PlansDirectory
from flows.plans.service import PlanService
from flows.plans.watch import PlanWatchers
from mcp_server.config import Settings, prepare_environment
from mcp_server import resources
from mcp_server.control import ControlSocket
from mcp_server.guard import placement
from mcp_server.guard.middleware import NOT_FOUND, Guard
from mcp_server.guard.setup import ServerAuth, build_guard, server_auth
from mcp_server.resources.common import answer_mime_type
from mcp_server.tools import default_groups, group_modules
from mcp_server.tools.common import ToolSet, argument_error_result, crash_result
from store import jobs as store_jobs
from store import plans as store_plans
from store import sources as store_sources
from store.engine import get_engine

log = logging.getLogger(__name__)

LISTINGS: tuple[CacheableMethod, ...] = ("tools/list", "resources/list", "resources/templates/list", "prompts/list")

INSTRUCTIONS = """assay indexes files and answers questions about them.
Start with `index` on a folder inside the allowed roots (see session-info), then `navigate` / `inspect` it, group
entries into resource sets (a DAG) and query them with the resource-* tools. Paths are absolute.
To automate: write a plan (sources + rules with conditions and outcomes) with plan-create, as fields or as DSL / YAML
text; plan-validate checks it, plan-preview shows what it would do, plan-explain says why a file matches or not,
plan-execute runs it (continuous plans keep watching).
To find passages: search (hybrid semantic + full-text) or search_documents. To cite one: each hit's citation is an
address (doc://ID#pages=3-5, video://ID#t=192-230, audio://ID#t=..., image://ID#bbox=x1,y1,x2,y2, text://ID#lines=10-20)
that resolve checks against the file and extracts (virtual: true only checks); getStructure shows a file's map
(give a path the first time), getNode one node, map-put takes a map an agent made."""



@dataclass
class AssayApp:
    """What every tool needs; built once per server."""

    settings: Settings
    engine: Engine
    roots: Roots
    runner: JobRunner
    plans: PlanService
    preferences: dict = field(default_factory=dict)  # session preferences (also persisted in the store)
    sources: SourceManager | None = None  # live and manual sources (reference 000, "Source Management")
    control: ControlSocket | None = None  # <data dir>/assay.sock: `assay index` hands its jobs to this process
    deployments: Deployments | None = None  # the deployments this serving process runs for Prefect's UI
    prefect_url: str | None = None  # Prefect's API this process reports to, once it answers
    guard: Guard | None = None  # the serving process's guard (callers, limits, audit): made by build_server
    _citations: CitationService | None = field(default=None, init=False, repr=False)  # see citations()
    _citations_lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)
    _prefect_thread: threading.Thread | None = field(default=None, init=False, repr=False)  # see _start_prefect

    @classmethod
    def create(cls, settings: Settings, *, reap: bool = True) -> "AssayApp":
        """``reap=False`` for a command-line call, which may run beside a server whose jobs are alive."""
        prepare_environment(settings)
        capabilities.load_capabilities()
        engine = get_engine(settings.db_url, statement_timeout=settings.database.statement_timeout)
        reaped = store_jobs.reap_orphans(engine) if reap else 0
        if reaped:
            log.warning("marked %d job(s) left running by a previous server as failed", reaped)
        reset = store_sources.reset_running(engine) if reap else 0  # a command beside a server leaves its sources
        if reset:
            log.info("%d source(s) left running by a previous server are stopped", reset)
        roots = Roots.of(settings.effective_roots)
        runner = JobRunner(engine, settings.db_url, use_prefect=settings.use_prefect, max_workers=4)
        reaped = store_plans.reap_running(engine) if reap else 0
        if reaped:
            log.warning("marked %d plan execution(s) left running by a previous server as errors", reaped)
        plans = PlanService(engine, roots, use_prefect=settings.use_prefect, runner=runner)
        plans.watching = PlanWatchers(plans)
        if settings.plans_dir is not None:
            plans.plans_dir = PlansDirectory(settings.plans_dir, plans)
            plans.plans_dir.load_all()
        return cls(settings=settings, engine=engine, roots=roots, runner=runner, plans=plans,
                   sources=SourceManager(engine, runner, roots))

    def citations(self) -> CitationService:
        """The one CitationService (resource maps, addresses, resolution), made on first use: a server that is never
        asked for a citation does not build it, and it reads the document settings (symlinks) when first needed."""
        with self._citations_lock:
            if self._citations is None:
                self._citations = CitationService(self.engine, self.roots, self.settings.data_dir,
                                                  allow_symlinks=doc_settings.current().allow_symlinks)
            return self._citations

    def start_background(self) -> None:
        """What a serving process runs beside the protocol: starting Prefect, reloading plan files, resuming
        continuous plans, listening for command-line calls (mcp_server/control.py)."""
        if self.settings.use_prefect:
            self._start_prefect()
        capabilities.start_background(self.engine)
        self.control = ControlSocket(self)
        self.control.start()
        if self.plans.plans_dir is not None:
            self.plans.plans_dir.start()
        capabilities.start_plans(self.plans, self.roots, self.settings)  # plans that ship with a capability
        self.plans.resume()

    def _start_prefect(self) -> None:
        """Bring Prefect up in a thread (its server with the UI, unless told otherwise), then serve the deployments of
        the plans, of index and of classify jobs, so runs can be started, retried and cancelled from the UI."""
        settings = self.settings
        export_for_runs(data_dir=settings.data_dir, store_url=settings.db_url, roots=self.roots.paths)
        prefect.configure(settings.data_dir, ui=settings.prefect_ui, port=settings.prefect_port)

        def start() -> None:
            try:
                self.prefect_url = prefect.ensure_api()
                deployments = Deployments()
                pool_name = settings.cluster.work_pool
                if pool_name is None:
                    plans = PlanDeployments(self.engine, deployments)
                    self.plans.deployments = plans  # plans saved from now on are deployed once the runner is up
                    deployments.start([*plans.initial(), index_deployment(), classify_deployment()])
                else:  # the plans are deployed on the work pool, their runs handed to its workers
                    pool = WorkPool(pool_name, lease_seconds=settings.cluster.lease_seconds)
                    plans = PlanDeployments(self.engine, pool)
                    pool.start(plans.initial())
                    self.plans.deployments = plans
                    self.runner.pool = pool
                    deployments.start([index_deployment(), classify_deployment()])
                self.deployments = deployments
                self.runner.deployments = deployments
                log.info("Prefect is ready: %s; assay's flows are served as deployments", ui_url(self.prefect_url))
            except Exception:  # the first flow run tries again and reports what is wrong
                log.exception("starting Prefect failed")

        self._prefect_thread = threading.Thread(target=start, name="assay-prefect-start", daemon=True)
        self._prefect_thread.start()

    def wait_for_prefect(self, timeout: float | None = None) -> str | None:
        """Prefect's API URL once it answers (None when it did not start)."""
        thread = getattr(self, "_prefect_thread", None)
        if thread is not None:
            thread.join(timeout)
        return self.prefect_url

    def close(self) -> None:
        if self.guard is not None:
            self.guard.close()
            self.guard = None
        if self.deployments is not None:
            self.runner.deployments = None
            self.runner.pool = None
            self.plans.deployments = None
            self.deployments.stop()
            self.deployments = None
        if self.control is not None:
            self.control.stop()  # first: no new calls; those running are cancelled and answered
            self.control = None
        if self.plans.plans_dir is not None:
            self.plans.plans_dir.stop()
        self.plans.shutdown()
        if self.sources is not None:
            self.sources.shutdown()
        self.runner.shutdown()


class AssayServer(MCPServer[AssayApp]):
    """The MCP server of one AssayApp, which its lifespan yields (``ctx.request_context.lifespan_context``), with
    the tools of a ToolSet (made whole before the server). Argument-validation failures and crashes are tool errors
    of the one shape every client reads (see tools.common.refusal); a resource answers in its own MIME type when
    its function gave one (see resources.common.mixed_resource)."""

    def __init__(self, app: AssayApp, tools: ToolSet, *, guard: Guard | None = None,
                 auth: ServerAuth | None = None) -> None:
        @asynccontextmanager
        async def lifespan(_: MCPServer[AssayApp]) -> AsyncIterator[AssayApp]:
            yield app  # made and closed by whoever serves it (the command line, a test)

        # listings depend on the caller when callers authenticate: a shared cache must not serve them to another
        scope: Literal["public", "private"] = "private" if auth is not None else "public"
        hints = {method: CacheHint(ttl_ms=0, scope=scope) for method in LISTINGS}
        super().__init__("assay", instructions=INSTRUCTIONS, version="0.1.0", tools=tools.list(), lifespan=lifespan,
                         middleware=[guard] if guard is not None else None, cache_hints=hints,
                         token_verifier=auth.verifier if auth is not None else None,
                         auth=auth.settings if auth is not None else None)
        self.tool_names = tools.names()
        self.guard = guard
        self.authenticated = auth is not None

    def _tool_input_schema(self, name: str) -> dict[str, Any] | None:
        """A tool's schema for the SDK's check of Mcp-Param headers, which runs before the guard: none for a tool
        the caller may not see, so a hidden tool's schema shows through no error."""
        token = get_access_token()
        if token is not None and not placement.visible(name, frozenset(token.scopes)):
            return None
        return super()._tool_input_schema(name)

    async def call_tool(self, name, arguments, context=None):
        if name not in self.tool_names:
            raise MCPError(NOT_FOUND, f"unknown tool {name!r}; tools/list lists the tools you may call")
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            log.exception("tool %s raised an unexpected exception", name)
            return crash_result(name)
        except ToolError as exc:
            if isinstance(exc.__cause__, ValidationError):
                return argument_error_result(name, exc.__cause__)
            raise

    async def read_resource(self, uri, context=None):
        contents = await super().read_resource(uri, context)
        if isinstance(contents, InputRequiredResult):
            return contents
        return [replace(item, mime_type=answer_mime_type(item.content) or item.mime_type) for item in contents]


def build_server(app: AssayApp) -> AssayServer:
    """The MCP server of ``app``, with its guard (mcp_server/guard) and, over HTTP with ``server.auth``, the SDK's
    bearer-token auth."""
    tools = ToolSet()
    modules = group_modules()
    for group in app.settings.tool_groups or default_groups(app.settings.server.auth):
        importlib.import_module(f"mcp_server.tools.{modules[group]}").register(tools, app)
    if app.guard is None:
        app.guard = build_guard(app.settings, app.engine)
    mcp = AssayServer(app, tools, guard=app.guard, auth=server_auth(app.settings, app.engine, app.roots))
    resources.register(mcp, app)
    return mcp
