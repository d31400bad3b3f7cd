"""Classification: thumbnails, video timelines, metadata and content hashes (the ``classifier`` outcome).

The first capability built in its own subpackage on the registries (``flows.capabilities``): importing it registers
the ``classifier`` outcome executor (``flows.classify.executor``) and the condition fields it fills
(``flows.classify.fields``), and marks the "metadata" producer installed so conditions on ``width``, ``duration`` or
``exif.Model`` validate. Its artifact cache lives in ``<data dir>/cache`` (``data_dir``: the one
``flows.capabilities.configure`` was told). In the pool's worker processes nothing is registered: they only run
``flows.classify.worker``.
"""

from __future__ import annotations

from flows.capabilities import data_dir  # noqa: F401  (re-exported: the classifier's modules read it from here)
from flows.workers import in_worker_process


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
