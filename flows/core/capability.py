"""The capability declaration and the registries the installed capabilities fill.

A capability is a subpackage of flows/ (``INSTALLED``) that declares itself once, in ``flows/<name>/capability.py``:
``CAPABILITY = Capability(...)`` names the capabilities it imports (``needs``) and what it adds: outcome executors,
the condition-field producers it installs with how its fields are worked out and which outcomes fill them, job
kinds, its MCP tool groups and resource modules (by name: flows does not import mcp_server), and optional hooks
(``configure``, ``start_background``, ``start_plans``). Importing a capability's package registers nothing; the
core does (:func:`load_capabilities`), from the declarations: the producers into ``dsl.fields``, everything else
into the :class:`Registry` of its kind (``flows.core.outcomes``, ``flows.core.conditions``, ``flows.core.runner``),
each filled on first use. Registering a name twice is an error.

The declaration is a module of its own, not the package's ``__init__``: the worker processes of the pools import a
capability's package (``flows.classify.worker``, ``flows.documents.extract``) and need their one function, not the
executors, the store and the DSL a declaration imports (about a second and tens of MB per worker); their modules
reach no declaration and no registry (tests/test_import_graph.py), so a worker never loads one. Any other process —
the server, a command, a flow run Prefect's runner spawned for a deployment — loads them on first use.
"""

from __future__ import annotations

import hashlib
import importlib
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generic, Iterable, TypeVar

from dsl.fields import PRODUCERS, install_producer

if TYPE_CHECKING:  # the types a declaration holds; their modules import this one (for Registry)
    from sqlalchemy.engine import Engine

    from flows.core.conditions import FieldRegistration, Filler
    from flows.core.outcomes import OutcomeExecutor
    from flows.core.runner import JobKind

log = logging.getLogger(__name__)

# the capabilities this version installs, in the order they load (and list their executors, tool groups, hooks)
INSTALLED: tuple[str, ...] = (
    "index",      # walking, index jobs, watching, sources, navigation
    "plans",      # plans: compile, run, preview, watch; outcomes selection_set and chained
    "fileops",    # rename, move, delete
    "classify",   # thumbnails, timelines, metadata, content hashes (outcome classifier)
    "documents",  # text extraction and full-text search (outcome extract_text, the "documents" plan)
    "semantic",   # chunks, embeddings, hnswlib collections, hybrid search, labels (outcomes embed, label)
    "citations",  # resource maps, addresses, resolution into pages / clips / crops / lines (outcome map)
)


@dataclass(frozen=True)
class Capability:
    """What one capability (the package ``flows.<name>``) adds to assay, declared once."""

    name: str
    summary: str
    needs: tuple[str, ...] = ()  # the capabilities whose packages it imports (tests/test_import_graph.py checks)
    executors: tuple[OutcomeExecutor, ...] = ()  # outcome executors, by their ``type``
    producers: tuple[str, ...] = ()  # dsl.fields producers it installs: conditions on their fields validate
    fields: tuple[FieldRegistration, ...] = ()  # how the computed / content / registered fields it fills are worked out
    fillers: tuple[Filler, ...] = ()  # which of its outcome types fill which fields (plan-preview's notes)
    job_kinds: tuple[JobKind, ...] = ()
    tool_groups: tuple[str, ...] = ()  # groups of mcp_server.tools (module: the name with "_" for "-")
    resources: tuple[str, ...] = ()  # modules of mcp_server.resources
    configure: Callable[[Path], object] | None = None  # told the data dir (see :func:`configure`)
    start_background: Callable[[Engine], object] | None = None  # what a serving process starts beside the protocol
    start_plans: Callable[[Any, Any, Any], object] | None = None  # installs its plans: (plans, roots, settings)


_lock = threading.RLock()
_installed: tuple[Capability, ...] | None = None
_loaded: tuple[Capability, ...] | None = None


def installed() -> tuple[Capability, ...]:
    """The declarations of the installed capabilities (``flows.<name>.capability.CAPABILITY``), imported once and
    checked: each named after its package, each need installed and loaded before it."""
    global _installed
    with _lock:
        if _installed is None:
            found: list[Capability] = []
            for name in INSTALLED:
                capability = importlib.import_module(f"flows.{name}.capability").CAPABILITY
                if capability.name != name:
                    raise ValueError(f"flows.{name}.capability declares a capability named {capability.name!r}")
                missing = [n for n in capability.needs if n not in {c.name for c in found}]
                if missing:
                    raise ValueError(f"capability {name!r} needs {', '.join(missing)}, not installed before it; "
                                     f"installed: {', '.join(INSTALLED)}")
                found.append(capability)
            _installed = tuple(found)
        return _installed


def load_capabilities() -> tuple[Capability, ...]:
    """Register what the installed capabilities declare: their producers (``dsl.fields``) and every registry made
    so far (those made later fill themselves from the same declarations on first use). Idempotent."""
    global _loaded
    with _lock:
        if _loaded is None:
            capabilities = installed()
            by_producer: dict[str, str] = {}
            for capability in capabilities:
                for producer in capability.producers:
                    if producer in by_producer:
                        raise ValueError(f"producer {producer!r} is installed by both {by_producer[producer]!r} "
                                         f"and {capability.name!r}")
                    if producer not in PRODUCERS:
                        raise ValueError(f"capability {capability.name!r} installs an unknown producer "
                                         f"{producer!r}; known: {', '.join(PRODUCERS)}")
                    by_producer[producer] = capability.name
            for producer in by_producer:
                install_producer(producer)
            _loaded = capabilities
        for registry in list(_REGISTRIES):
            registry.fill(_loaded)
        return _loaded


T = TypeVar("T")

_REGISTRIES: list[Registry[Any]] = []


class Registry(Generic[T]):
    """The things of one kind the installed capabilities declare, by name (``declared(capability)`` yields their
    (name, thing) pairs): filled once by :func:`load_capabilities` or on first use, whichever comes first. ``add``
    registers one more (a test's, an extension's). A name registered twice is an error; ``check(name, thing)`` may
    refuse a thing too (raising ValueError)."""

    def __init__(self, what: str, declared: Callable[[Capability], Iterable[tuple[str, T]]], *,
                 check: Callable[[str, T], None] | None = None) -> None:
        self.what = what
        self._declared, self._check = declared, check
        self.entries: dict[str, T] = {}  # what is registered now (tests may patch it)
        self._by: dict[str, str] = {}
        self._filled = False
        _REGISTRIES.append(self)  # no lock: a module making a registry may be imported while another thread loads

    def add(self, name: str, thing: T, *, by: str = "a direct registration") -> T:
        if self._check is not None:
            self._check(name, thing)
        with _lock:
            if name in self.entries:
                first = self._by.get(name, "another")
                raise ValueError(f"{self.what} {name!r} is already registered (by {first}); registering it again "
                                 f"({by}) is an error")
            self.entries[name] = thing
            self._by[name] = by
        return thing

    def fill(self, capabilities: Iterable[Capability]) -> None:
        """Register what ``capabilities`` declare of this kind, once."""
        with _lock:
            if self._filled:
                return
            self._filled = True
            for capability in capabilities:
                for name, thing in self._declared(capability):
                    self.add(name, thing, by=f"capability {capability.name!r}")

    def all(self) -> dict[str, T]:
        """Everything registered, once the installed capabilities have registered theirs."""
        if not self._filled:
            load_capabilities()
        return self.entries

    def get(self, name: str) -> T | None:
        if name not in self.entries and not self._filled:
            load_capabilities()
        return self.entries.get(name)


# --- the hooks ---------------------------------------------------------------------------------------------------

_data_dir: Path | None = None


def data_dir() -> Path:
    """The data dir this process was configured with (:func:`configure`); else ASSAY_DATA_DIR; else ~/.assay (the
    server's own default). The classifier keeps its artifact cache there, the semantic index its model exports."""
    if _data_dir is not None:
        return _data_dir
    env = os.environ.get("ASSAY_DATA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".assay"


def store_files(engine: Engine, name: str) -> Path:
    """The directory of files a capability keeps for ``engine``'s store (created): beside a SQLite database,
    ``<database file>.<name>/``; for any other store, ``<data dir>/<name>/<12 hex digits of the store URL's hash>/``,
    so two stores sharing a data dir never share files."""
    # (not store.engine.database_file: the command line's hand-off imports this module and must not load SQLAlchemy)
    url = engine.url
    if url.get_backend_name() == "sqlite" and url.database not in (None, "", ":memory:"):
        db = Path(url.database)
        path = db.with_name(f"{db.name}.{name}")
    else:
        rendered = url.render_as_string(hide_password=True)
        path = data_dir() / name / hashlib.sha256(rendered.encode()).hexdigest()[:12]
    path.mkdir(parents=True, exist_ok=True)
    return path


def configure(data_dir: str | Path) -> None:
    """Set the data dir (:func:`data_dir`) and tell every installed capability with a ``configure`` hook."""
    global _data_dir
    _data_dir = Path(data_dir)
    for capability in load_capabilities():
        if capability.configure is not None:
            capability.configure(_data_dir)


def start_background(engine: Engine) -> None:
    """What a serving process starts beside the protocol, for each installed capability with a ``start_background``
    hook (the classifier sweeps orphans of its artifact cache left while no server ran)."""
    for capability in load_capabilities():
        if capability.start_background is not None:
            capability.start_background(engine)


def start_plans(plans: Any, roots: Any, settings: Any) -> None:
    """At server start, before continuous plans resume watching: each installed capability with a ``start_plans``
    hook installs (or updates) the plans it ships with, as plans like any other (plan-list shows them; a user may
    pause or change them). ``plans`` is the plan service, ``settings`` the server's (``mcp_server.config.Settings``).
    A hook that fails is logged; the server starts anyway."""
    for capability in load_capabilities():
        if capability.start_plans is not None:
            try:
                capability.start_plans(plans, roots, settings)
            except Exception:
                log.exception("%s: installing its plans failed; the server goes on", capability.name)
