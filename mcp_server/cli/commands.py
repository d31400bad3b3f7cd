"""The command table: each `assay` command's name, the module that holds it and its line in `assay --help`.

A command's module (its options in ``add_parser``, its work in ``run``) imports what its work needs at its top: the
app, the store, Prefect, the MCP SDK, the services. So the program imports only the module of the command it runs,
named here and loaded with :func:`load` once the command line has named it (the way pip's command table works):
`assay --help` loads none, `assay search` not the server's, `assay index` beside a running server only the hand-off
client.

The same goes one level down for the commands a running `assay serve` may take over (index, classify): what runs
their job in this process when no server takes it is named here too (``local``, ``module:function``) and loaded by
:func:`local_run` only then, so a command handed to a server never imports the app.
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
    local: str | None = None  # "module:function" running its job here when no server takes it


COMMANDS: dict[str, Command] = {  # in the order `assay --help` lists them
    "serve": Command("mcp_server.cli.serve", "run the MCP server (stdio or Streamable HTTP at /mcp)"),
    "index": Command("mcp_server.cli.index", "index a path into the store, with a progress bar",
                     local="mcp_server.cli.local:index"),
    "classify": Command("mcp_server.cli.classify", "thumbnails, timelines, metadata and hashes of indexed files",
                        local="mcp_server.cli.local:classify"),
    "search": Command("mcp_server.cli.search", "search the text of the indexed documents, printing matches like grep"),
    "ask": Command("mcp_server.cli.ask", "ask the semantic index a question in words, printing the best passages"),
    "cite": Command("mcp_server.cli.cite",
                    "resolve a citation address into its file: PDF pages, a clip, a crop, lines"),
    "map": Command("mcp_server.cli.map", "build a file's citation map and print its tree of nodes"),
    "plan": Command("mcp_server.cli.plan",
                    "validate, run, preview, explain, print plans; print the plan JSON Schema"),
}


def load(name: str) -> ModuleType:
    """The module of the command ``name``, imported now."""
    return importlib.import_module(COMMANDS[name].module)


def local_run(name: str) -> Callable[..., dict[str, Any]]:
    """The function that runs the job of command ``name`` in this process (its module imported now)."""
    local = COMMANDS[name].local
    if local is None:
        raise ValueError(f"`assay {name}` hands no job to a server")
    module, _, function = local.partition(":")
    run: Callable[..., dict[str, Any]] = getattr(importlib.import_module(module), function)
    return run
