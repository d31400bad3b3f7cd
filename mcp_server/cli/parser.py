"""The `assay` argument parser: the program's description, then one sub-command per entry of the command table
(mcp_server.cli.commands), each listed by its summary. The command being run gets its options from its module
(``add_parser``, loaded now), which names the function that runs it (``run``, set as the default ``run`` of its
arguments); the others' modules are not loaded."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from mcp_server.cli.commands import COMMANDS, load
from mcp_server.cli.common import common_options

DESCRIPTION = """assay: a declarative workflow engine for files, exposed over MCP.
Index folders, group files into resource sets, query and navigate them, from any MCP client."""

EPILOG = """examples:
  assay serve                                   # stdio, for an MCP client that launches it
  assay serve --transport http --port 3000 --root ~/Photos
  assay index ~/Photos                          # index once, with a progress bar
  assay classify ~/Photos --operations thumbnail metadata   # thumbnails, metadata, hashes of the indexed files
  assay serve --config assay.yaml               # settings from YAML (server.port, server.cors_origins, ...)
  assay serve --plans-dir plans/                # plan files in git: loaded, reloaded on change, written back
  assay plan validate examples/plans/* --root examples/corpus     # every problem with its place
  assay plan run examples/plans/tidy.yaml --root examples/corpus  # run once as a Prefect flow, with progress
  assay search 'dice | squares -diagonal' --scope games      # the documents' text, printed like grep
  assay ask 'how do figures move?' --set games  # the semantic index: best passages with their pages / lines
  assay cite 'doc://rules#pages=3-4' -o rules-p3-4.pdf   # a citation into its file, with the source's hash
  assay map games/rules.pdf                     # a file's citation map: its tree of nodes and their addresses

environment: ASSAY_DATA_DIR, ASSAY_DATABASE_URL, ASSAY_ROOTS (os.pathsep-separated), CORS_ORIGINS (comma-separated),
ASSAY_ALLOWED_HOSTS (comma-separated), ASSAY_TOOL_GROUPS (comma-separated). Command-line options override the
environment, which overrides --config."""



def command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` runs: its first word when that names one (the program itself takes no option but
    --help, so a command is always first); None for `assay`, `assay --help`, a misspelt command."""
    return argv[0] if argv and argv[0] in COMMANDS else None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of `assay`, with the options of ``command`` (None: only the list of commands)."""
    parser = argparse.ArgumentParser(prog="assay", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, entry in COMMANDS.items():
        if name == command:
            module = load(name)
            module.add_parser(sub, common_options, entry.summary).set_defaults(run=module.run)
        else:
            sub.add_parser(name, help=entry.summary)
    return parser
