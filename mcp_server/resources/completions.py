"""completion/complete for the arguments of the synthesis:// resource templates.

Set names (synthesis://resource-sets/{name}/...), metric names (.../metrics/{metric}), plan names
(synthesis://plans/{name}...), job ids (synthesis://jobs/{id}) and paths (synthesis://nodes/{+path}: the entries of
the folder typed so far, confined to the roots; the value has no leading "/", as in the URI). At most 100 values, in
order, with the total. Reference 000 has no template taking a saved-query or a source name, so there is none to
complete. A capability that adds a template adds its completer to ``COMPLETERS``.
"""

from __future__ import annotations

import heapq
import os
import posixpath
from typing import TYPE_CHECKING, Any, Callable

import anyio
from mcp.server.mcpserver import MCPServer
from mcp_types import Completion, CompletionArgument, CompletionContext, ResourceTemplateReference
from sqlalchemy.engine import Engine

from flows.core.roots import Roots
from store import set_queries
from store.completions import Named, names_starting
from store.errors import AssayError

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

MAX_VALUES = 100  # the protocol's limit for one answer


def _matches(values: list[str], prefix: str) -> Completion:
    hits = [v for v in values if v.startswith(prefix)]
    return Completion(values=hits[:MAX_VALUES], total=len(hits), has_more=len(hits) > MAX_VALUES)


def complete_name(engine: Engine, named: Named, prefix: str) -> Completion:
    """Names (or ids) of ``named`` things starting with ``prefix``, in order: the first 100 and how many there are."""
    values, total = names_starting(engine, named=named, prefix=prefix, limit=MAX_VALUES)
    return Completion(values=values, total=total, has_more=total > len(values))


def complete_path(roots: Roots, value: str) -> Completion:
    """Paths inside the roots that continue ``value`` (a node URI's path, without its leading "/"): the roots
    themselves while the value is still above them, then the entries of the folder typed so far whose names start
    with what follows its last "/" (hidden names only once a "." is typed). Reads one directory, keeping 100 names."""
    typed = "/" + value.lstrip("/")
    folder, stem = (typed.rstrip("/") or "/", "") if typed.endswith("/") else posixpath.split(typed)
    above = sorted(root for root in roots.paths if root.startswith(typed))
    try:
        resolved = roots.resolve(folder, field="path")
    except AssayError:
        return _matches([r[1:] for r in above], value.lstrip("/"))
    names, total = [], 0
    try:
        with os.scandir(resolved) as entries:
            def wanted():
                nonlocal total
                for entry in entries:
                    if entry.name.startswith(stem) and (stem.startswith(".") or not entry.name.startswith(".")):
                        total += 1
                        yield entry.name
            names = heapq.nsmallest(MAX_VALUES, wanted())
    except OSError:
        pass
    values = [posixpath.join(folder, name)[1:] for name in names]
    return Completion(values=values, total=total, has_more=total > len(values))


Completer = Callable[[Any, str], Completion]

# (resource template, argument) -> completer(app, typed value)
COMPLETERS: dict[tuple[str, str], Completer] = {}
for _template in ("synthesis://resource-sets/{name}", "synthesis://resource-sets/{name}/entries{?limit,offset}",
                  "synthesis://resource-sets/{name}/children", "synthesis://resource-sets/{name}/parents",
                  "synthesis://resource-sets/{name}/stats", "synthesis://resource-sets/{name}/metrics/{metric}"):
    COMPLETERS[(_template, "name")] = lambda app, v: complete_name(app.engine, "resource-set", v)
for _template in ("synthesis://plans/{name}", "synthesis://plans/{name}/executions"):
    COMPLETERS[(_template, "name")] = lambda app, v: complete_name(app.engine, "plan", v)
COMPLETERS[("synthesis://resource-sets/{name}/metrics/{metric}", "metric")] = \
    lambda app, v: _matches(list(set_queries.METRICS), v)
COMPLETERS[("synthesis://jobs/{id}", "id")] = lambda app, v: complete_name(app.engine, "job", v)
COMPLETERS[("synthesis://maps/{resource_id}", "resource_id")] = \
    lambda app, v: complete_name(app.engine, "resource-map", v)
for _template in ("synthesis://nodes/{+path}", "synthesis://nodes/{+path}/thumbnail",
                  "synthesis://nodes/{+path}/metadata"):
    COMPLETERS[(_template, "path")] = lambda app, v: complete_path(app.roots, v)


def register(mcp: MCPServer, app: AssayApp) -> None:
    @mcp.completion()
    async def complete(ref: Any, argument: CompletionArgument,
                       context: CompletionContext | None) -> Completion | None:
        if not isinstance(ref, ResourceTemplateReference):
            return None
        completer = COMPLETERS.get((ref.uri, argument.name))
        if completer is None:
            return None
        return await anyio.to_thread.run_sync(completer, app, argument.value)
