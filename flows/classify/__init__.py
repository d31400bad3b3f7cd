"""Classification: thumbnails, video timelines, metadata and content hashes (the ``classifier`` outcome).

The first capability built in its own subpackage on the registries (``flows.capabilities``): importing it registers
the ``classifier`` outcome executor (``flows.classify.executor``) and the condition fields it fills
(``flows.classify.fields``), and marks the "metadata" producer installed so conditions on ``width``, ``duration`` or
``exif.Model`` validate. ``configure(data_dir)`` tells it where the artifact cache lives (``<data dir>/cache``). In the pool's worker
processes nothing is registered: they only run ``flows.classify.worker``.
"""

from __future__ import annotations

import os
from pathlib import Path

from flows.workers import in_worker_process

_data_dir: Path | None = None


def configure(data_dir: str | Path) -> None:
    """Where the cache of generated artifacts lives (called by ``flows.capabilities.configure``)."""
    global _data_dir
    _data_dir = Path(data_dir)


def data_dir() -> Path:
    """The configured data dir; else ASSAY_DATA_DIR; else ~/.assay (the server's own default)."""
    if _data_dir is not None:
        return _data_dir
    env = os.environ.get("ASSAY_DATA_DIR")
    return Path(env) if env else Path.home() / ".assay"


def start_background(engine) -> None:
    """At server start: sweep the artifact cache in a background thread (orphans of entries deleted meanwhile)."""
    from flows.classify.sweep import sweep_in_background

    sweep_in_background(engine, data_dir())


def _register() -> None:
    from flows.classify import fields  # noqa: F401  (the condition fields it fills; installs the producer)
    from flows.classify.executor import ClassifierExecutor
    from flows.outcomes import EXECUTORS, register_executor

    if "classifier" not in EXECUTORS:
        register_executor(ClassifierExecutor())


if not in_worker_process():
    _register()
