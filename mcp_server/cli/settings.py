"""A command's settings, from its arguments over the environment over ``--config`` (mcp_server.config), and the
path it names confined to their roots: read before anything else, by `assay index` beside a running server too
(mcp_server/cli/handoff.py), so nothing here loads the store, Prefect or the MCP SDK."""

from __future__ import annotations

import argparse
import os
from typing import Any

from flows.core.roots import Roots
from mcp_server.config import Settings, load_settings


def settings_from(args: argparse.Namespace, **extra: Any) -> Settings:
    """The settings of this call: the options every command takes (``--root``, ``--data-dir``, ...) and ``extra``
    over the environment over ``--config``."""
    cli = {"roots": args.roots, "data_dir": args.data_dir, "database_url": args.database_url, **extra}
    return load_settings(cli, config_file=args.config)


def confined(settings: Settings, path: str) -> str:
    """PATH (from the current directory, ``~`` expanded) resolved inside the settings' roots, without building the
    app: `assay index` and `assay classify` check it before they hand their job to a server."""
    return Roots.of(settings.effective_roots).resolve(os.path.abspath(os.path.expanduser(path)), field="path")
