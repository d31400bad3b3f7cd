"""The MCP server: tools, resources, transports and the `assay` command line."""
