"""The settings: one typed model (pydantic-settings), read once, its sections those of the YAML config file.

Every setting has a YAML key (its place in the model: ``server.port``, ``documents.ocr``), most an environment
variable (``flows.env.Env``; the names are those assay has always read), some a command-line option of mcp_server's
(by the flat names of :data:`FLAT`: ``port``, ``database_url``). :meth:`AssaySettings.load` layers them, highest
first: the values given (the command line), the environment, the YAML file, the defaults; an error names the
setting, where its value came from and what was wrong (:class:`ConfigError`). A model built from values
(``AssaySettings(port=3999)``) holds those and the defaults: nothing is read.

This process's settings (:func:`current`) are the ones a serving process or a command was started with
(:func:`install`, from mcp_server's ``prepare_environment``), else the environment's (a flow run Prefect's runner
started in a subprocess, a worker); parsed once, and again only when one of the variables changes (a test that
sets one sees it). The capabilities read their section from them (``flows.documents.settings.current()``). The
README's settings table is generated from the model (mcp_server/docs.py) and checked by a test.
"""

from __future__ import annotations

import os
import threading
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Literal, Mapping, get_args

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict
from typing_extensions import Annotated, Self

from flows.core.cluster_settings import ClusterSection
from flows.core.guard_settings import GuardSection
from flows.core.roots import Roots
from flows.env import (ConfigError, Env, EnvironmentSource, Key, YamlFileSource, env_of, file_model, leaves, lookup,
                       merged, put, remove, unset_dropped, variables)

__all__ = ["AssaySettings", "ConfigError", "ConfigFile", "FLAT", "RunSettings", "current", "environment_of",
           "export_for_runs", "install", "run_settings"]

DEFAULT_MODEL = "all-MiniLM-L6-v2"  # = flows.semantic.model.DEFAULT_MODEL (checked by tests/flows/core)
Backend = Literal["torch", "onnx", "onnx-int8", "openvino"]
BACKENDS: tuple[str, ...] = get_args(Backend)  # = flows.semantic.model.BACKENDS


Lower = BeforeValidator(lambda v: v.strip().lower() if isinstance(v, str) else v)
Expanded = AfterValidator(lambda p: p.expanduser() if isinstance(p, Path) else p)
PoolMode = Annotated[Literal["process", "thread"], Lower]


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerSection(Section):
    transport: Literal["stdio", "http"] = Field("stdio", description="stdio, or http (Streamable HTTP at /mcp)")
    host: str = Field("127.0.0.1", description="address the HTTP server binds")
    port: int = Field(3000, ge=1, le=65535, description="port of the HTTP server")
    cors_origins: Annotated[list[str], Env("CORS_ORIGINS", sep=",")] = Field(
        default_factory=list, description="origins browsers may call from, besides http(s)://localhost, 127.0.0.1 "
                                          "and [::1] on any port; * allows any, with a warning")
    cors_credentials: bool = Field(True, description="send Access-Control-Allow-Credentials")
    allowed_hosts: Annotated[list[str], Env("ASSAY_ALLOWED_HOSTS", sep=",")] = Field(
        default_factory=list, description="Host header values accepted besides localhost, 127.0.0.1 and [::1]; "
                                          "required when the host is not a loopback address; * allows any")
    public_url: Annotated[str | None, Env("ASSAY_PUBLIC_URL")] = Field(
        None, description="the HTTP server's address as clients reach it (behind a proxy), which artifact URLs "
                          "(/api/content) start with; none: http://HOST:PORT")
    auth: Annotated[bool, Env("ASSAY_AUTH")] = Field(
        False, description="HTTP callers must present a bearer token (a local user's API token, or a JWT when "
                           "guard.jwt_issuer is set); see the guard section")
    allow_unauthenticated: Annotated[bool, Env("ASSAY_ALLOW_UNAUTHENTICATED")] = Field(
        False, description="serve a non-loopback address without auth (anyone who reaches the port may call every "
                           "tool the local operator may)")


class DatabaseSection(Section):
    url: Annotated[str | None, Env("ASSAY_DATABASE_URL")] = Field(
        None, description="SQLAlchemy URL of the store, e.g. postgresql+psycopg://user@host/assay; none: the SQLite "
                          "file assay.db in the data dir")
    statement_timeout: Annotated[float, Env("ASSAY_STATEMENT_TIMEOUT")] = Field(
        30.0, ge=0, description="seconds a store statement may run before it is stopped with QUERY_TIMEOUT "
                                "(0: no limit)")


class PlansSection(Section):
    dir: Annotated[Path | None, Env("ASSAY_PLANS_DIR"), Expanded] = Field(
        None, description="directory of plan files (YAML, JSON, DSL .plan): loaded at start, reloaded on change, "
                          "written back")


class ToolsSection(Section):
    groups: Annotated[list[str] | None, Env("ASSAY_TOOL_GROUPS", sep=",")] = Field(
        None, description="tool groups to list (fewer tools, less of an agent's context); none: all")


class PrefectSection(Section):
    enabled: bool = Field(True, description="run jobs as Prefect flows; false: as plain functions, no flow runs "
                                            "recorded")
    ui: Annotated[bool, Env("ASSAY_PREFECT_UI")] = Field(
        True, description="a serving process starts Prefect's server with its UI and services; false: the bare API")
    port: Annotated[int, Env("ASSAY_PREFECT_PORT")] = Field(
        4200, ge=0, le=65535, description="loopback port of Prefect's server with its UI (0 or taken: any free "
                                          "port)")


class DocumentsSection(Section):
    max_bytes: Annotated[int, Env("ASSAY_DOCUMENT_MAX_BYTES")] = Field(
        50 * 1024 * 1024, ge=1, description="files larger than this many bytes are not extracted (FILTER_FAILED, "
                                            "with the reason)")
    timeout: Annotated[float, Env("ASSAY_DOCUMENT_TIMEOUT")] = Field(
        120.0, ge=0.1, description="seconds one file's text extraction may take before it is stopped")
    ocr: Annotated[bool, Env("ASSAY_OCR")] = Field(
        True, description="read pages without a text layer, and images of text, with Tesseract")
    ocr_language: Annotated[str, Env("ASSAY_OCR_LANGUAGE")] = Field(
        "eng", min_length=1, description="Tesseract language(s) for OCR, e.g. eng+deu")
    max_read_chars: Annotated[int, Env("ASSAY_MAX_DOCUMENT_READ_CHARS")] = Field(
        100_000, ge=1, description="read_document returns at most this many characters (then truncated: true)")
    search_timeout: Annotated[float, Env("ASSAY_SEARCH_TIMEOUT")] = Field(
        30.0, ge=0.01, description="seconds a document search may take before SEARCH_TIMEOUT")
    allow_symlinks: Annotated[bool, Env("ASSAY_ALLOW_SYMLINKS")] = Field(
        False, description="the document tools follow symbolic links inside the roots (else SYMLINK_NOT_ALLOWED)")
    builtin_plan: Annotated[bool, Env("ASSAY_DOCUMENTS_PLAN")] = Field(
        True, description="install the built-in \"documents\" plan (text of every document under the roots, kept "
                          "current) at server start")
    pool: Annotated[PoolMode, Env("ASSAY_DOCUMENT_POOL")] = Field(
        "process", description="where text is extracted: worker processes, or threads (for measurement)")
    workers: Annotated[int | None, Env("ASSAY_DOCUMENT_WORKERS")] = Field(
        None, ge=1, description="extraction worker processes; none: one per core")


class SemanticSection(Section):
    model: Annotated[str, Env("ASSAY_EMBED_MODEL")] = Field(
        DEFAULT_MODEL, min_length=1, description="the sentence-transformers model: the packaged one by name, or a "
                                                 "model directory (never downloaded)")
    backend: Annotated[Backend | None, Env("ASSAY_EMBED_BACKEND"), Lower] = Field(
        None, description="torch, onnx, onnx-int8 or openvino, recorded per collection; none: the fastest within 1% "
                          "of torch's retrieval quality, openvino (bench/semantic_backends.py)")
    batch_size: Annotated[int, Env("ASSAY_EMBED_BATCH")] = Field(64, ge=1, description="chunks per encode call")
    device: Annotated[str, Env("ASSAY_EMBED_DEVICE"), Lower] = Field(
        "cpu", min_length=1, description="cpu, or cuda / mps (GPU_NOT_AVAILABLE when asked for and absent)")
    search_ef: Annotated[int, Env("ASSAY_SEARCH_EF")] = Field(
        128, ge=10, description="hnswlib ef at query time (higher: better recall, slower)")
    threads: Annotated[int, Env("ASSAY_EMBED_THREADS")] = Field(
        0, ge=0, description="threads the model runs on; 0: OMP_NUM_THREADS when set, else every core")
    model_cache: Annotated[Path | None, Env("ASSAY_MODEL_CACHE"), Expanded] = Field(
        None, description="where the ONNX / OpenVINO exports of the model are built once and kept; none: "
                          "models/ in the data dir")


class ClassifySection(Section):
    pool: Annotated[PoolMode, Env("ASSAY_CLASSIFY_POOL")] = Field(
        "process", description="where files are classified: worker processes, or threads (for measurement)")
    workers: Annotated[int | None, Env("ASSAY_CLASSIFY_WORKERS")] = Field(
        None, ge=1, description="classifier worker processes; none: one per core")


class IndexSection(Section):
    writer: Annotated[PoolMode, Env("ASSAY_INDEX_WRITER")] = Field(
        "process", description="who writes an index scan to a SQLite store: a writer process, or a thread")


class TrashSection(Section):
    retention_days: Annotated[float, Env("ASSAY_TRASH_RETENTION_DAYS")] = Field(
        30, ge=0, description="days a file assay put in the trash stays there before it is deleted for good (checked "
                              "at start and hourly); 0 keeps it until trash-empty")


# The command line's names (mcp_server's options, ``load(values)``, ``AssaySettings(port=...)``): flat; each the
# place of one setting. ``data_dir`` and ``roots`` are at the top already.
FLAT: dict[str, Key] = {
    "transport": ("server", "transport"), "host": ("server", "host"), "port": ("server", "port"),
    "cors_origins": ("server", "cors_origins"), "cors_credentials": ("server", "cors_credentials"),
    "allowed_hosts": ("server", "allowed_hosts"), "public_url": ("server", "public_url"),
    "auth": ("server", "auth"), "allow_unauthenticated": ("server", "allow_unauthenticated"),
    "database_url": ("database", "url"), "statement_timeout": ("database", "statement_timeout"),
    "plans_dir": ("plans", "dir"), "tool_groups": ("tools", "groups"),
    "work_pool": ("cluster", "work_pool"), "cache_dir": ("cluster", "cache_dir"),
    "use_prefect": ("prefect", "enabled"), "prefect_ui": ("prefect", "ui"), "prefect_port": ("prefect", "port"),
}

_LOADING: ContextVar[tuple[PydanticBaseSettingsSource, ...]] = ContextVar("assay_settings_sources", default=())


class AssaySettings(BaseSettings):
    """Everything assay can be configured with; see the module docstring for where each value comes from."""

    model_config = SettingsConfigDict(extra="forbid")

    data_dir: Annotated[Path, Env("ASSAY_DATA_DIR"), Expanded] = Field(
        Path("~/.assay"), validate_default=True, description="the store, Prefect's home, caches and model exports")
    roots: Annotated[list[str], Env("ASSAY_ROOTS", sep=os.pathsep)] = Field(
        default_factory=list, description="directories callers may touch; none: your home directory")
    server: ServerSection = Field(ServerSection(), description="the MCP server")
    database: DatabaseSection = Field(DatabaseSection(), description="the store")
    plans: PlansSection = Field(PlansSection(), description="plan files")
    tools: ToolsSection = Field(ToolsSection(), description="the MCP tools listed")
    prefect: PrefectSection = Field(PrefectSection(), description="Prefect")
    documents: DocumentsSection = Field(DocumentsSection(), description="text extraction and search")
    semantic: SemanticSection = Field(SemanticSection(), description="the semantic index")
    classify: ClassifySection = Field(ClassifySection(), description="the classifier")
    index: IndexSection = Field(IndexSection(), description="indexing")
    trash: TrashSection = Field(TrashSection(), description="the trash delete-files and the trash outcome use")
    guard: GuardSection = Field(GuardSection(), description="callers, permissions, rate limits and the audit log")
    cluster: ClusterSection = Field(ClusterSection(), description="a Prefect work pool, its workers, the shared "
                                                                  "artifact cache")

    def __init__(self, **values: Any) -> None:
        super().__init__(**_nested(values))

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
                                   env_settings: PydanticBaseSettingsSource,
                                   dotenv_settings: PydanticBaseSettingsSource,
                                   file_secret_settings: PydanticBaseSettingsSource
                                   ) -> tuple[PydanticBaseSettingsSource, ...]:
        """The values given, then what :meth:`load` reads (the environment, then the YAML file); the defaults come
        last. Outside a load nothing is read: a model built from values holds those and the defaults."""
        return (init_settings, *_LOADING.get())

    @classmethod
    def load(cls, values: Mapping[str, Any] | None = None, *, config_file: str | Path | None = None,
             env: Mapping[str, str] | None = None) -> Self:
        """``values`` (the command line's, by their flat names or in sections; None and empty ones are unset) over
        ``env`` (default: ``os.environ``) over the YAML ``config_file`` over the defaults; :class:`ConfigError`
        naming what was wrong and where it came from."""
        given = unset_dropped(_nested(values or {}))
        environment = EnvironmentSource(cls, env)
        file = YamlFileSource(cls, Path(config_file).expanduser()) if config_file is not None else None
        token = _LOADING.set((environment,) if file is None else (environment, file))
        try:
            return cls(**given)
        except ValidationError as exc:
            problems = [_problem(error, given, environment) for error in exc.errors()]
            raise ConfigError("invalid settings: " + "; ".join(text for text, _ in problems),
                              field=problems[0][1]) from None
        finally:
            _LOADING.reset(token)

    def given(self) -> dict[str, Any]:
        """The values these settings were given or read, in sections (what a default left alone is not)."""
        return self.model_dump(exclude_unset=True)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with ``update``, whose keys may be the command line's flat names (``plans_dir``); validated."""
        if not update:
            return super().model_copy(deep=deep)
        return type(self).model_validate(merged(self.given(), _nested(update)))

    @property
    def db_url(self) -> str:
        """The store: ``database.url``, else SQLite's assay.db in the data dir."""
        return self.database.url or f"sqlite:///{self.data_dir / 'assay.db'}"

    @property
    def effective_roots(self) -> list[str]:
        """The configured roots, or the user's home directory when none are configured."""
        return self.roots or [str(Path.home())]

    # The command line's flat names, read: mcp_server reads these (the sections are the model's shape).
    @property
    def transport(self) -> str:
        return self.server.transport

    @property
    def host(self) -> str:
        return self.server.host

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def cors_origins(self) -> list[str]:
        return self.server.cors_origins

    @property
    def cors_credentials(self) -> bool:
        return self.server.cors_credentials

    @property
    def allowed_hosts(self) -> list[str]:
        return self.server.allowed_hosts

    @property
    def public_url(self) -> str | None:
        return self.server.public_url

    @property
    def database_url(self) -> str | None:
        return self.database.url

    @property
    def statement_timeout(self) -> float:
        return self.database.statement_timeout

    @property
    def plans_dir(self) -> Path | None:
        return self.plans.dir

    @property
    def tool_groups(self) -> list[str] | None:
        return self.tools.groups

    @property
    def use_prefect(self) -> bool:
        return self.prefect.enabled

    @property
    def prefect_ui(self) -> bool:
        return self.prefect.ui

    @property
    def prefect_port(self) -> int:
        return self.prefect.port


def _nested(values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` with the command line's flat names (:data:`FLAT`) put in their sections."""
    tree: dict[str, Any] = {}
    for key, value in values.items():
        if key in FLAT:
            flat: dict[str, Any] = {}
            put(flat, FLAT[key], value)
            tree = merged(tree, flat)
        else:
            tree = merged(tree, {key: value})
    return tree


def _problem(error: Any, given: Mapping[str, Any], environment: EnvironmentSource) -> tuple[str, str]:
    """One validation error as ``setting (origin): message``, and the name of the field it concerns (the config
    file's values were checked as it was read: ``flows.env.YamlFileSource``)."""
    loc = tuple(str(p) for p in error["loc"])
    key = ".".join(loc)
    for n in range(len(loc), 0, -1):  # the setting is the longest prefix of the error's place that was set
        found, value = lookup(given, loc[:n])
        if found:
            return f"{key} (command line: {value!r}): {error['msg']}", key
        origin = environment.origin(loc[:n])
        if origin is not None:
            return f"{key} ({origin}): {error['msg']}", origin.split("=")[0]
    return f"{key}: {error['msg']}", key


ConfigFile = file_model(AssaySettings)  # the YAML config file's shape


# --- this process's settings -------------------------------------------------------------------------------------

ENVIRONMENT = variables(AssaySettings)  # every variable the settings are read from, and its setting
_lock = threading.Lock()
_installed: tuple[AssaySettings, dict[str, str]] | None = None  # the settings, and the variables set then
_generation = 0  # counts installs, so a reading cached for one is not taken for the next
_cache: tuple[tuple[Any, ...], AssaySettings] | None = None


def _environment() -> dict[str, str]:
    return {name: os.environ[name] for name in ENVIRONMENT if name in os.environ}


def install(settings: AssaySettings | None) -> None:
    """Make ``settings`` this process's (:func:`current`): a serving process's or a command's, at start (None: the
    environment's again)."""
    global _installed, _generation
    with _lock:
        _installed = (settings, _environment()) if settings is not None else None
        _generation += 1


def current() -> AssaySettings:
    """This process's settings: those installed, with any variable set, changed or unset since then read again,
    else the environment's; parsed again only when a variable changes; :class:`ConfigError` for a bad value."""
    global _cache
    with _lock:
        installed, generation = _installed, _generation
    environment = _environment()
    key = (generation, *(environment.get(name) for name in ENVIRONMENT))
    cached = _cache
    if cached is not None and cached[0] == key:
        return cached[1]
    given = None
    if installed is not None:
        base, then = installed
        given = base.given()
        for name, place in ENVIRONMENT.items():
            if then.get(name) != environment.get(name):  # the environment says otherwise now: it decides
                remove(given, place)
    settings = AssaySettings.load(given, env=environment)
    _cache = (key, settings)
    return settings


def environment_of(settings: AssaySettings, *sections: str) -> dict[str, str]:
    """The variables that give ``settings``' given values of ``sections`` (all: every section), as text."""
    out: dict[str, str] = {}
    given = settings.given()
    for key, field in leaves(AssaySettings):
        env = env_of(field)
        found, value = lookup(given, key)
        if env is None or not found or value is None or (sections and key[0] not in sections):
            continue
        if isinstance(value, (list, tuple)):
            value = (env.sep or ",").join(str(v) for v in value)
        elif isinstance(value, bool):
            value = "on" if value else "off"
        out[env.name] = f"{value:g}" if isinstance(value, float) else str(value)
    return out


@dataclass(frozen=True)
class RunSettings:
    """What a flow run needs when its parameters are all it got (a run of a deployment, in a subprocess or on a
    worker): its store and its roots."""

    store_url: str
    roots: tuple[str, ...]

    def effective_roots(self) -> Roots:
        return Roots.of(self.roots or [str(Path.home())])


def run_settings() -> RunSettings:
    """This process's store and roots (:func:`current`)."""
    settings = current()
    return RunSettings(store_url=settings.db_url, roots=tuple(settings.roots))


def export_for_runs(*, data_dir: Path, store_url: str, roots: Iterable[str]) -> None:
    """Put a serving process's store and roots in its environment, with the documents' and the semantic index's
    settings it was given (config file, environment), so the runs it starts in subprocesses (Prefect's runner)
    work as its own; called once at start, before any run."""
    installed = _installed
    if installed is not None:
        os.environ.update(environment_of(installed[0], "documents", "semantic"))
    os.environ["ASSAY_DATA_DIR"] = str(data_dir)
    os.environ["ASSAY_DATABASE_URL"] = store_url
    os.environ["ASSAY_ROOTS"] = os.pathsep.join(roots)
