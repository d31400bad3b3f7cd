"""The `assay` argument parser: the program's description, then one sub-command per module of this package, each
adding its own options (``add_parser``) and naming the function that runs it (``run``, set as the default ``run``
of its arguments)."""

from __future__ import annotations

import argparse

from mcp_server.cli import ask, cite, classify, index, plan, search, serve
from mcp_server.cli import map as map_command
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

COMMANDS = (serve, index, classify, search, ask, cite, map_command, plan)  # in the order `assay --help` lists them


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="assay", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add_parser(sub, common_options).set_defaults(run=command.run)
    return parser
