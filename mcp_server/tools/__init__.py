"""Tool groups: the registry of the MCP tools a capability adds. Each module has ``register(tools, app)``, which adds
its tools to a ``common.ToolSet`` (the server is built with them), and holds thin typed wrappers over store/flows
functions; an operator lists fewer groups with ``--tool-groups``.

The groups are those the installed capabilities declare (``Capability.tool_groups``, ``flows.core.capability``),
then the server's own over the store; a group's module is its name with ``_`` for ``-``."""

from flows.core.capability import installed

# the server's own groups, over the store itself: diagnostics, entry queries, resource sets, the session
SERVER_GROUPS: tuple[str, ...] = ("database", "queries", "resource-navigation", "resource-queries", "resource-sets",
                                  "session")


def module_of(group: str) -> str:
    """The module under mcp_server.tools that registers ``group``."""
    return group.replace("-", "_")


# tool group -> module under mcp_server.tools that registers it
GROUP_MODULES: dict[str, str] = {
    group: module_of(group)
    for group in (*(g for capability in installed() for g in capability.tool_groups), *SERVER_GROUPS)
}
