"""The command table: each `assay` command's name, the module that holds it and its line in `assay --help`.

A command's module (its options in ``add_parser``, its work in ``run``) imports what its work needs at its top. So the
program imports only the module of the command it runs, named here and loaded with :func:`load` once the command line
has named it (the way pip's command table works): `assay --help` loads none, `assay search` not the server's.

Some commands need the application object (the store, the capabilities, Prefect, the MCP SDK: seconds to import)
only on some paths: `assay index` and `assay classify` when no running server takes their job, `assay plan` for the
actions on the store (not show and schema). Their module imports only what the light paths need, and the work
through the app is named here too (``with_app``, ``module:function``) and loaded by :func:`with_app` only when the
command gets there: a command handed to a server never imports the app.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(frozen=True)
class Command:
    module: str  # the module with add_parser(sub, common, summary) and run(args)
    summary: str  # its line in `assay --help`
    with_app: str | None = None  # "module:function": its work through the application object, when not all of it is


COMMANDS: dict[str, Command] = {  # in the order `assay --help` lists them
    "serve": Command("mcp_server.cli.serve", "run the MCP server (stdio or Streamable HTTP at /mcp)"),
    "index": Command("mcp_server.cli.index", "index a path into the store, with a progress bar",
                     with_app="mcp_server.cli.local:index"),
    "classify": Command("mcp_server.cli.classify", "thumbnails, timelines, metadata and hashes of indexed files",
                        with_app="mcp_server.cli.local:classify"),
    "search": Command("mcp_server.cli.search", "search the text of the indexed documents, printing matches like grep"),
    "ask": Command("mcp_server.cli.ask", "ask the semantic index a question in words, printing the best passages"),
    "cite": Command("mcp_server.cli.cite",
                    "resolve a citation address into its file: PDF pages, a clip, a crop, lines"),
    "map": Command("mcp_server.cli.map", "build a file's citation map and print its tree of nodes"),
    "plan": Command("mcp_server.cli.plan",
                    "validate, run, preview, explain, print plans; print the plan JSON Schema",
                    with_app="mcp_server.cli.plan_app:run"),
    "worker": Command("mcp_server.cli.worker", "run a work pool's plan executions and outcome batches on this machine"),
    "status": Command("mcp_server.cli.status", "the work pool: its workers, runs in flight, where each batch runs"),
    "users": Command("mcp_server.cli.users",
                     "the local users of a guarded server: add, list, roles, permissions, roots"),
    "tokens": Command("mcp_server.cli.tokens", "the users' API tokens: create (printed once), list, revoke"),
    "undo": Command("mcp_server.cli.undo", "reverse file operations from the journal: one, a tool call or a plan "
                                           "execution; or list a path's history"),
    "trash": Command("mcp_server.cli.trash", "list what assay put in the trash, or empty it for good"),
    "db": Command("mcp_server.cli.db", "the store: its schema revision (upgrade, current, history), backup, restore"),
}


def load(name: str) -> ModuleType:
    """The module of the command ``name``, imported now."""
    return importlib.import_module(COMMANDS[name].module)


def with_app(name: str) -> Callable[..., Any]:
    """The function doing the work of command ``name`` through the application object (its module imported now)."""
    target = COMMANDS[name].with_app
    if target is None:
        raise ValueError(f"`assay {name}` names no work through the app apart from its module")
    module, _, function = target.partition(":")
    work: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return work
