"""Settings: defaults < YAML config file < environment < command line.

The YAML file uses reference 000's keys (``server.port``, ``server.host``, ``server.cors_origins``) plus ours::

    server: {transport: http, host: 127.0.0.1, port: 3000, cors_origins: ["http://localhost:5173"],
             allowed_hosts: [assay.lan]}
    data_dir: ~/.assay
    database: {url: postgresql+psycopg://user@localhost/assay}
    roots: [~/Photos, ~/Documents]
    tools: {groups: [indexing, navigation, resource-sets]}
    plans: {dir: ./plans}
    prefect: {ui: true, port: 4200}
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from mcp_server.tools import GROUP_MODULES
from store.errors import InvalidInput

DEFAULT_DATA_DIR = "~/.assay"
TOOL_GROUPS = tuple(GROUP_MODULES)


class ConfigError(InvalidInput):
    code = "INVALID_CONFIG"


class ServerSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    transport: Literal["stdio", "http"] | None = None
    host: str | None = None
    port: int | None = Field(default=None, ge=1, le=65535)
    cors_origins: list[str] | None = None
    cors_credentials: bool | None = None
    allowed_hosts: list[str] | None = None
    public_url: str | None = None


class DatabaseSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    url: str | None = None
    statement_timeout: float | None = Field(default=None, ge=0)


class ToolsSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    groups: list[str] | None = None


class PlansSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    dir: str | None = None


class PrefectSection(BaseModel):
    model_config = ConfigDict(extra="forbid")
    ui: bool | None = None
    port: int | None = Field(default=None, ge=0, le=65535)


class ConfigFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    server: ServerSection = ServerSection()
    plans: PlansSection = PlansSection()
    prefect: PrefectSection = PrefectSection()
    data_dir: str | None = None
    database: DatabaseSection = DatabaseSection()
    roots: list[str] | None = None
    tools: ToolsSection = ToolsSection()


class Settings(BaseModel):
    transport: Literal["stdio", "http"] = "stdio"
    host: str = "127.0.0.1"
    port: int = Field(default=3000, ge=1, le=65535)
    data_dir: Path = Path(DEFAULT_DATA_DIR).expanduser()
    database_url: str | None = None
    # seconds a store statement may run (store.engine); None: ASSAY_STATEMENT_TIMEOUT or the default
    statement_timeout: float | None = Field(default=None, ge=0)
    roots: list[str] = Field(default_factory=list)
    # origins browsers may call from besides the loopback ones; "*": any (reference 000's default, not ours)
    cors_origins: list[str] = Field(default_factory=list)
    cors_credentials: bool = True
    # Host header values accepted besides the loopback names; required for a non-loopback binding; "*": any
    allowed_hosts: list[str] = Field(default_factory=list)
    # the HTTP server's address as clients reach it (behind a proxy); artifact URLs (/api/content) start with it
    public_url: str | None = None
    tool_groups: list[str] | None = None  # None: every group
    use_prefect: bool = True
    # a serving process starts Prefect's server with its UI on this loopback port (0 or taken: any free port);
    # False: the bare API, no UI (``--no-ui``)
    prefect_ui: bool = True
    prefect_port: int = Field(default=4200, ge=0, le=65535)
    plans_dir: Path | None = None

    @field_validator("tool_groups")
    @classmethod
    def _known_groups(cls, groups: list[str] | None) -> list[str] | None:
        if groups is not None:
            unknown = [g for g in groups if g not in TOOL_GROUPS]
            if unknown:
                raise ValueError(f"unknown tool group(s) {unknown}; known: {', '.join(TOOL_GROUPS)}")
        return groups

    @property
    def db_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'assay.db'}"

    @property
    def effective_roots(self) -> list[str]:
        """The configured roots, or the user's home directory when none are configured."""
        return self.roots or [str(Path.home())]


def _read_config_file(path: Path) -> ConfigFile:
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror or exc}", field="config") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file {path} is not valid YAML: {exc}", field="config") from None
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path} must hold a mapping of settings, not {type(data).__name__}")
    try:
        return ConfigFile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        raise ConfigError(
            f"config file {path}: {problems}. Known keys: server.transport, server.host, server.port, "
            "server.cors_origins, server.cors_credentials, server.allowed_hosts, server.public_url, data_dir, database.url, roots, tools.groups, plans.dir, prefect.ui, prefect.port",
            field="config",
        ) from None


def _split(value: str, sep: str) -> list[str]:
    return [part.strip() for part in value.split(sep) if part.strip()]


def load_settings(cli: dict[str, Any] | None = None, *, config_file: str | Path | None = None,
                  env: dict[str, str] | None = None) -> Settings:
    """Merge the four layers; raises :class:`ConfigError` naming the bad key or value."""
    env = dict(os.environ if env is None else env)
    values: dict[str, Any] = {}
    if config_file is not None:
        cfg = _read_config_file(Path(config_file).expanduser())
        srv = cfg.server
        values.update({k: v for k, v in {
            "transport": srv.transport, "host": srv.host, "port": srv.port, "cors_origins": srv.cors_origins,
            "cors_credentials": srv.cors_credentials, "allowed_hosts": srv.allowed_hosts,
            "public_url": srv.public_url, "data_dir": cfg.data_dir, "database_url": cfg.database.url,
            "statement_timeout": cfg.database.statement_timeout,
            "roots": cfg.roots, "tool_groups": cfg.tools.groups, "plans_dir": cfg.plans.dir,
            "prefect_ui": cfg.prefect.ui, "prefect_port": cfg.prefect.port,
        }.items() if v is not None})
    if env.get("ASSAY_DATA_DIR"):
        values["data_dir"] = env["ASSAY_DATA_DIR"]
    if env.get("ASSAY_DATABASE_URL"):
        values["database_url"] = env["ASSAY_DATABASE_URL"]
    if env.get("ASSAY_STATEMENT_TIMEOUT"):
        values["statement_timeout"] = env["ASSAY_STATEMENT_TIMEOUT"]
    if env.get("ASSAY_ROOTS"):
        values["roots"] = _split(env["ASSAY_ROOTS"], os.pathsep)
    if env.get("CORS_ORIGINS"):
        values["cors_origins"] = _split(env["CORS_ORIGINS"], ",")
    if env.get("ASSAY_ALLOWED_HOSTS"):
        values["allowed_hosts"] = _split(env["ASSAY_ALLOWED_HOSTS"], ",")
    if env.get("ASSAY_PUBLIC_URL"):
        values["public_url"] = env["ASSAY_PUBLIC_URL"]
    if env.get("ASSAY_PLANS_DIR"):
        values["plans_dir"] = env["ASSAY_PLANS_DIR"]
    if env.get("ASSAY_PREFECT_UI"):
        values["prefect_ui"] = env["ASSAY_PREFECT_UI"].strip().lower() not in ("0", "false", "no", "off")
    if env.get("ASSAY_PREFECT_PORT"):
        values["prefect_port"] = env["ASSAY_PREFECT_PORT"]
    if env.get("ASSAY_TOOL_GROUPS"):
        values["tool_groups"] = _split(env["ASSAY_TOOL_GROUPS"], ",")
    values.update({k: v for k, v in (cli or {}).items() if v not in (None, [], ())})
    if "data_dir" in values:
        values["data_dir"] = Path(str(values["data_dir"])).expanduser()
    if values.get("plans_dir"):
        values["plans_dir"] = Path(str(values["plans_dir"])).expanduser().resolve()
    try:
        settings = Settings.model_validate(values)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid settings: {problems}") from None
    settings.data_dir = settings.data_dir.expanduser().resolve()
    missing = [r for r in settings.roots if not Path(r).expanduser().is_dir()]
    if missing:
        raise ConfigError(f"root(s) {', '.join(missing)} are not existing directories", field="roots")
    return settings


def prepare_environment(settings: Settings) -> None:
    """Environment Prefect reads at import: its home under our data dir, telemetry off, logs on stderr."""
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.data_dir / "prefect"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_CLI_PROMPT", "false")
    if settings.statement_timeout is not None:  # the store reads it when it builds an engine
        os.environ["ASSAY_STATEMENT_TIMEOUT"] = f"{settings.statement_timeout:g}"
    from flows.core import prefect as prefect_support

    prefect_support.configure(settings.data_dir)  # where a server records the Prefect API it shares
    from flows import capabilities

    capabilities.configure(settings.data_dir)  # e.g. the classifier's artifact cache under <data dir>/cache
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
