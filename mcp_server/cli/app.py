"""What the commands that work through the application object share (all but `assay serve`, which makes its own,
and a job `assay index` or `assay classify` hands to a server): the app opened for one call, the roots of a command
that reads what the server built, the documents' settings."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from flows.documents.service import plan_roots
from flows.documents.settings import DocumentSettings
from mcp_server.app import AssayApp
from mcp_server.config import Settings, prepare_environment
from store.engine import get_engine
from store.errors import InvalidInput


@contextlib.contextmanager
def open_app(settings: Settings, *, plans_dir: bool = False) -> Iterator[AssayApp]:
    """The application object the MCP tools work through, for one command-line call: built without reaping
    (a server on the same store may be running those jobs), closed (its job threads joined) and its store
    connections released on the way out. ``plans_dir``: load the settings' plans directory (only the plan
    commands do; the others leave the plan files to the server)."""
    if not plans_dir and settings.plans_dir is not None:
        settings = settings.model_copy(update={"plans_dir": None})
    app = AssayApp.create(settings, reap=False)
    try:
        yield app
    finally:
        try:
            app.close()
        finally:
            app.engine.dispose()


def reading_settings(settings: Settings) -> Settings:
    """The settings of a command that reads what the server built (search, ask, cite, map): its roots are
    ``--root`` (or ASSAY_ROOTS, the config's) when given, else the folders the server's built-in documents plan
    covers (read from the store), else the home directory."""
    if settings.roots:
        return settings
    prepare_environment(settings)  # before the store's engine is made (its statement timeout)
    roots = plan_roots(get_engine(settings.db_url))
    return settings.model_copy(update={"roots": roots}) if roots else settings


def document_settings() -> DocumentSettings:
    """The documents' settings from the environment (flows.documents.settings), a bad value an InvalidInput."""
    try:
        return DocumentSettings.from_env()
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
