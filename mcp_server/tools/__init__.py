"""Tool groups: the registry of the MCP tools a capability adds. Each module has ``register(tools, app)``, which adds
its tools to a ``common.ToolSet`` (the server is built with them), and holds thin typed wrappers over store/flows
functions; an operator lists fewer groups with ``--tool-groups``."""

# tool group -> module under mcp_server.tools that registers it (a new capability adds its group here)
GROUP_MODULES: dict[str, str] = {
    "indexing": "indexing",
    "navigation": "navigation",
    "file-operations": "file_operations",
    "database": "database",
    "queries": "queries",
    "resource-navigation": "resource_navigation",
    "resource-queries": "resource_queries",
    "resource-sets": "resource_sets",
    "session": "session",
    "plans": "plans",
    "sources": "sources",
    "classifier": "classifier",
    "documents": "documents",
    "semantic": "semantic",
    "citations": "citations",
}
