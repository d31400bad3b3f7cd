"""The jobs `assay index` and `assay classify` run in this process when no `assay serve` takes them (none listens
on the data dir, or it leaves the job to the command: a path outside its roots, another store, --no-prefect), through
the app as the MCP tools run them (flows/index/service.py ``index_path``, flows/classify/service.py
``classify_path``), with the command's progress bar.

A module of its own, named in the command table (mcp_server.cli.commands) and loaded only when a job runs here: it
builds the app (the store, the capabilities, Prefect, the MCP SDK), which a command handed to a server never loads.
"""

from __future__ import annotations

import argparse
from typing import Any

from flows.classify.service import classify_path
from flows.index.service import index_path
from mcp_server.cli.app import open_app
from mcp_server.cli.classify import classify_bar
from mcp_server.cli.index import index_bar
from mcp_server.config import Settings


def index(settings: Settings, root: str, args: argparse.Namespace) -> dict[str, Any]:
    """`assay index ROOT` here: index_path's result."""
    with open_app(settings) as app:
        return index_path(app.runner, root=root, async_=False, force=args.force, max_age=args.max_age,
                          follow_symlinks=args.follow_symlinks, on_progress=index_bar())


def classify(settings: Settings, path: str, operations: tuple[str, ...], args: argparse.Namespace) -> dict[str, Any]:
    """`assay classify PATH` here: classify_path's result."""
    with open_app(settings) as app:
        return classify_path(app.runner, path=path, operations=operations, force=args.force, async_=False,
                             on_progress=classify_bar())
