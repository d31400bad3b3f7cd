"""Tool groups. Each module has ``register(mcp, app)`` and holds thin typed wrappers over store/flows functions."""
