"""Tool groups: the registry of the MCP tools a capability adds. Each module has ``register(tools, app)``, which adds
its tools to a ``common.ToolSet`` (the server is built with them), and holds thin typed wrappers over store/flows
functions; an operator lists fewer groups with ``--tool-groups``.

The groups are those the installed capabilities declare (``Capability.tool_groups``, ``flows.core.capability``),
then the server's own over the store; a group's module is its name with ``_`` for ``-``. They are read from the
declarations on first use (:func:`group_modules`), not when this package is imported: the declarations import the
executors, Prefect and the store (seconds), and every command reads its settings through mcp_server.config, which
checks ``--tool-groups`` against these names, `assay index` handed to a server included."""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from types import MappingProxyType
from typing import Any

from flows.core.capability import installed

# the server's own groups, over the store itself: diagnostics, entry queries, resource sets, the session; and the
# operator's (reference 004): server introspection and control, users, read-only SQL
OPERATOR_GROUPS: tuple[str, ...] = ("admin", "users", "sql")
SERVER_GROUPS: tuple[str, ...] = ("cluster", "database", "queries", "resource-navigation", "resource-queries",
                                  "resource-sets", "session", *OPERATOR_GROUPS)


def module_of(group: str) -> str:
    """The module under mcp_server.tools that registers ``group``."""
    return group.replace("-", "_")


@cache
def group_modules() -> Mapping[str, str]:
    """Tool group -> module under mcp_server.tools that registers it: the installed capabilities' groups, in the
    order they are installed, then the server's own."""
    groups = (*(g for capability in installed() for g in capability.tool_groups), *SERVER_GROUPS)
    return MappingProxyType({group: module_of(group) for group in groups})


def default_groups(guarded: bool) -> tuple[str, ...]:
    """The groups listed when the operator names none: all of them on a server whose callers authenticate (each
    sees what its permissions allow), and all but the operator's groups otherwise (a local agent has no use for
    user management, and every tool listed costs its context)."""
    return tuple(g for g in group_modules() if guarded or g not in OPERATOR_GROUPS)


def __getattr__(name: str) -> Any:
    if name == "GROUP_MODULES":  # group_modules(), under the name it has always had
        return group_modules()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
