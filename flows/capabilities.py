"""The capabilities this version of assay installs, each a subpackage of flows/ that plugs into the registries.

Importing a capability's package registers what it provides: outcome executors (``flows.outcomes.register_executor``)
and the condition fields it fills (``dsl.fields.install_producer``). Its tools are a tool group
(``mcp_server.tools.GROUP_MODULES``) and its resources a module of ``mcp_server.resources``. Adding a capability
(classify, documents, semantic, citations) adds its package name here; the plan engine does not change.
"""

from __future__ import annotations

import importlib
import threading

INSTALLED: tuple[str, ...] = (
    "flows.index",     # walking, index jobs, watching, sources, navigation
    "flows.plans",     # plans: compile, run, preview, watch; outcomes selection_set and chained
    "flows.fileops",   # rename, move, delete
)

_lock = threading.Lock()
_loaded = False


def load_capabilities() -> None:
    """Import every installed capability once, so its registrations are in place."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if not _loaded:
            for name in INSTALLED:
                importlib.import_module(name)
            _loaded = True
