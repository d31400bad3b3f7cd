"""The server's settings: the one model of ``flows.core.settings`` (command line > environment > YAML config file >
defaults), with what only the server knows checked on top: the tool groups exist, the roots are directories.

The YAML file's keys are the model's sections (reference 000's ``server.port``, ``server.host``,
``server.cors_origins``, plus ours)::

    server: {transport: http, host: 127.0.0.1, port: 3000, cors_origins: ["http://localhost:5173"],
             allowed_hosts: [assay.lan]}
    data_dir: ~/.assay
    database: {url: postgresql+psycopg://user@localhost/assay}
    roots: [~/Photos, ~/Documents]
    tools: {groups: [indexing, navigation, resource-sets]}
    plans: {dir: ./plans}
    prefect: {ui: true, port: 4200}
    documents: {ocr: false}

README's settings table lists every key with its environment variable and default (mcp_server/docs.py).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

from flows.core import capability as capabilities
from flows.core import prefect as prefect_support
from flows.core import settings as core
from flows.core.settings import AssaySettings, ConfigError, ConfigFile
from mcp_server.tools import group_modules

__all__ = ["ConfigFile", "ConfigError", "Settings", "load_settings", "prepare_environment", "tool_groups"]

Settings = AssaySettings  # the name the server has always used


def tool_groups() -> tuple[str, ...]:
    """Every tool group this server has: the installed capabilities' and the server's own. Read from their
    declarations when first asked for (mcp_server.tools.group_modules): a command that names no ``--tool-groups``
    loads none of them."""
    return tuple(group_modules())


def __getattr__(name: str) -> Any:
    if name == "TOOL_GROUPS":  # the groups, computed when first asked for (see tool_groups)
        return tool_groups()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def load_settings(cli: Mapping[str, Any] | None = None, *, config_file: str | Path | None = None,
                  env: Mapping[str, str] | None = None) -> Settings:
    """The settings of a serving process or a command: ``cli`` (the command line's, by their flat names; None and
    empty values unset) over ``env`` (default ``os.environ``) over ``config_file``; :class:`ConfigError` naming the
    bad key or value."""
    settings = AssaySettings.load(cli, config_file=config_file, env=env)
    known = tool_groups() if settings.tools.groups else ()
    unknown = [g for g in settings.tools.groups or () if g not in known]
    if unknown:
        raise ConfigError(f"unknown tool group(s) {unknown}; known: {', '.join(known)}", field="tools.groups")
    missing = [r for r in settings.roots if not Path(r).expanduser().is_dir()]
    if missing:
        raise ConfigError(f"root(s) {', '.join(missing)} are not existing directories", field="roots")
    settings.data_dir = settings.data_dir.resolve()
    if settings.plans.dir is not None:
        settings.plans = settings.plans.model_copy(update={"dir": settings.plans.dir.resolve()})
    return settings


def prepare_environment(settings: Settings) -> None:
    """Make ``settings`` this process's (``flows.core.settings.install``), and set the environment Prefect reads at
    import: its home under our data dir, telemetry off, logs on stderr."""
    core.install(settings)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.data_dir / "prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_CLI_PROMPT", "false")
    if "statement_timeout" in settings.database.model_fields_set:  # the store reads it when it builds an engine
        os.environ["ASSAY_STATEMENT_TIMEOUT"] = f"{settings.database.statement_timeout:g}"
    prefect_support.configure(settings.data_dir)  # where a server records the Prefect API it shares
    capabilities.configure(settings.data_dir)  # e.g. the classifier's artifact cache under <data dir>/cache
    cluster = settings.cluster
    if cluster.cache_dir is not None:  # store.cache reads it; the flow runs a pool's worker starts inherit it
        os.environ["ASSAY_CACHE_DIR"] = str(cluster.cache_dir)
        # the parameters of the outcome batches' task runs (Prefect's background tasks), which every worker reads
        os.environ.setdefault("PREFECT_RESULTS_LOCAL_STORAGE_PATH", str(cluster.cache_dir / "prefect-task-parameters"))
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
