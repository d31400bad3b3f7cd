"""Session tools: session-info and session-set-preferences (persisted, so they survive a restart)."""

from __future__ import annotations

import importlib.metadata
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BaseModel, Field

from mcp_server.config import TOOL_GROUPS
from mcp_server.tools.common import IDEMPOTENT_WRITE, READ_ONLY, ToolSet, tool
from store import diagnostics
from store import preferences as store_preferences

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


def _version() -> str:
    try:
        return importlib.metadata.version("assay")
    except importlib.metadata.PackageNotFoundError:
        return "0.0.0+unknown"


class SessionInfo(BaseModel):
    database_path: str = Field(description="the SQLite file, or the store URL with its password masked")
    database_size: int | None
    entry_count: int
    resource_set_count: int
    source_count: int
    plan_count: int
    saved_query_count: int
    backend: str
    store_url: str = Field(description="store URL, password masked")
    roots: list[str] = Field(description="directories tools may read and change; every path must lie inside one")
    tool_groups: list[str] = Field(description="tool groups this server lists")
    available_tool_groups: list[str]
    preferences: dict[str, Any]
    server: str
    version: str


class PreferencesResponse(BaseModel):
    preferences: dict[str, Any] = Field(description="every preference as it now stands")
    updated: list[str] = Field(description="keys this call set (or reset to their default with null)")
    message: str


PREFERENCES_HELP = ("Key-value pairs of preferences; null resets a key to its default. Known: "
                    + store_preferences.known_keys())


def register(tools: ToolSet, app: AssayApp) -> None:
    app.preferences.update(store_preferences.load_preferences(app.engine))  # the stored ones, from earlier runs

    @tool(tools, "session-info", READ_ONLY)
    def session_info() -> SessionInfo:
        """Get session and database information: where the store is, how big, what it holds, the allowed roots,
        the enabled tool groups and the current preferences."""
        engine = app.engine
        return SessionInfo(
            database_path=diagnostics.database_location(engine),
            database_size=diagnostics.database_size(engine),
            **diagnostics.store_counts(engine),
            backend=engine.dialect.name,
            store_url=diagnostics.masked_url(engine),
            roots=list(app.roots.paths),
            tool_groups=list(app.settings.tool_groups or TOOL_GROUPS),
            available_tool_groups=list(TOOL_GROUPS),
            preferences=dict(app.preferences),
            server="assay",
            version=_version(),
        )

    @tool(tools, "session-set-preferences", IDEMPOTENT_WRITE)
    def session_set_preferences(
        preferences: Annotated[dict[str, Any], Field(description=PREFERENCES_HELP)],
    ) -> PreferencesResponse:
        """Set user preferences. Keys and values are checked (all or nothing) and stored, so they survive a
        restart; the result echoes every preference as it now stands."""
        current, updated = store_preferences.set_preferences(app.engine, preferences)
        app.preferences.clear()
        app.preferences.update(current)
        message = f"updated {', '.join(updated)}" if updated else "nothing to update"
        return PreferencesResponse(preferences=current, updated=updated, message=message)
