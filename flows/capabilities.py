"""The capabilities this version of assay installs, each a subpackage of flows/ that plugs into the registries.

Importing a capability's package registers what it provides: outcome executors (``flows.outcomes.register_executor``)
and the condition fields it fills (``dsl.fields.install_producer``). A capability may ship plans of its own, installed
at server start by its ``start_plans`` hook (the documents capability's "documents" plan). Its tools are a tool group
(``mcp_server.tools.GROUP_MODULES``) and its resources a module of ``mcp_server.resources``. Adding a capability
(classify, documents, semantic, citations) adds its package name here; the plan engine does not change.
"""

from __future__ import annotations

import importlib
import os
import threading
from pathlib import Path

INSTALLED: tuple[str, ...] = (
    "flows.index",     # walking, index jobs, watching, sources, navigation
    "flows.plans",     # plans: compile, run, preview, watch; outcomes selection_set and chained
    "flows.fileops",   # rename, move, delete
    "flows.classify",  # thumbnails, timelines, metadata, content hashes (outcome classifier, classifier tools)
    "flows.documents",  # text extraction and full-text search (outcome extract_text, the "documents" plan, tools)
    "flows.semantic",  # chunks, embeddings, hnswlib collections, hybrid search, labels (outcomes embed, label)
    "flows.citations",  # resource maps, addresses, resolution into pages / clips / crops / lines (outcome map)
)

_lock = threading.Lock()
_loaded = False


def load_capabilities() -> None:
    """Import every installed capability once, so its registrations are in place."""
    global _loaded
    if _loaded:
        return
    with _lock:
        if not _loaded:
            for name in INSTALLED:
                importlib.import_module(name)
            _loaded = True


_data_dir: Path | None = None


def data_dir() -> Path:
    """The data dir this process was configured with (:func:`configure`); else ASSAY_DATA_DIR; else ~/.assay (the
    server's own default). The classifier keeps its artifact cache there, the semantic index its model exports."""
    if _data_dir is not None:
        return _data_dir
    env = os.environ.get("ASSAY_DATA_DIR")
    return Path(env).expanduser() if env else Path.home() / ".assay"


def configure(data_dir: str | Path) -> None:
    """Set the data dir (:func:`data_dir`) and tell every installed capability that wants more: calls
    ``configure(data_dir)`` on each installed package that has one."""
    global _data_dir
    _data_dir = Path(data_dir)
    load_capabilities()
    for name in INSTALLED:
        module = importlib.import_module(name)
        hook = getattr(module, "configure", None)
        if callable(hook):
            hook(data_dir)


def start_background(engine) -> None:
    """What a serving process starts beside the protocol for each installed capability that has a
    ``start_background(engine)`` (the classifier sweeps orphans of its artifact cache left while no server ran)."""
    load_capabilities()
    for name in INSTALLED:
        hook = getattr(importlib.import_module(name), "start_background", None)
        if callable(hook):
            hook(engine)


def start_plans(plans, roots, settings) -> None:
    """At server start, before continuous plans resume watching: each installed capability with a
    ``start_plans(plans_service, roots, settings)`` installs (or updates) the plans it ships with, as plans like any
    other (plan-list shows them; a user may pause or change them). ``settings`` are the server's
    (``mcp_server.config.Settings``). A hook that fails is logged; the server starts anyway."""
    import logging

    load_capabilities()
    for name in INSTALLED:
        hook = getattr(importlib.import_module(name), "start_plans", None)
        if callable(hook):
            try:
                hook(plans, roots, settings)
            except Exception:
                logging.getLogger(__name__).exception("%s: installing its plans failed; the server goes on", name)
