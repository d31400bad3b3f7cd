"""Documents: text extraction, a full-text index over it, and reference 001's document tools.

A capability on the registries (``flows.capabilities``), shaped like ``flows.classify``: importing it registers the
``extract_text`` outcome executor (``flows.documents.executor``). ``start_plans`` installs the plan that ships with
it, "documents" (``flows.documents.service``): every document under the roots extracted and indexed in the
background and kept current, listed by plan-list like any other plan so a user can see, pause or change it. In the
extraction pool's worker processes nothing is registered: they only run ``flows.documents.extract``.
"""

from __future__ import annotations

from flows.workers import in_worker_process


def start_plans(plans, roots, settings) -> None:
    """At server start (``flows.capabilities.start_plans``): install, update or leave alone the built-in
    "documents" plan, and run it when it has never run (see ``flows.documents.service.ensure_builtin_plan``)."""
    from flows.documents.service import ensure_builtin_plan

    ensure_builtin_plan(plans, roots, settings)


def _register() -> None:
    import flows.documents.conditions  # noqa: F401  (the text condition field: producer, content check, filler)
    from flows.documents.executor import TextExtractor
    from flows.outcomes import EXECUTORS, register_executor

    if "extract_text" not in EXECUTORS:
        register_executor(TextExtractor())


if not in_worker_process():
    _register()
