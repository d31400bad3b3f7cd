"""The plan that ships with assay: "documents", which extracts and indexes every document under the roots and keeps
the index current as files change.

It is a plan like any other (plan-list shows it, plan-update pauses or changes it, plan-explain says why a file is
extracted or not): one ``filesystem.watch`` source per root, mode continuous, and one rule "extract" whose condition
lists the extensions it reads (``flows.documents.formats.EXTENSIONS``, so a user sees what is extracted and can
edit the list), with the outcome ``extract_text``.

At server start (``ensure_builtin_plan``, through ``flows.core.capability.start_plans``), unless ASSAY_DOCUMENTS_PLAN
is off:

- missing: it is created, active when the roots were configured (``--root``, ASSAY_ROOTS, the config file), paused
  when the server fell back to the home directory (extracting a whole home directory is not something to start
  unasked; the log says how to turn it on), and an active one is executed: it scans, extracts, then keeps watching;
- present and as assay generated it (the preference ``generated`` holds the hash of the definition assay wrote, and
  the definition still hashes to it): brought up to date with the current roots if they changed; an active plan
  that never ran is executed, one that ran resumes watching with the other continuous plans (its watchers catch up
  on what changed while no server ran);
- present and changed by someone (a different hash, or no mark: a plan file named "documents", an edit over MCP, a
  pause): left exactly as it is.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from typing import Any, Iterable

from dsl.model import Plan
from flows.documents.formats import EXTENSIONS
from flows.documents.settings import DocumentSettings
from flows.core.roots import Roots
from store import plans as store_plans

log = logging.getLogger(__name__)

PLAN_NAME = "documents"
RULE_NAME = "extract"
MARK = "generated"  # the plan preference holding the hash of the definition assay generated

DESCRIPTION = (
    "Ships with assay: extracts the text of the documents under the roots (PDF, EPUB, Markdown, plain text, source "
    "code, HTML, DOCX) into the full-text index the document tools search (search_documents, read_document, ...), "
    "and keeps it current as files change. The rule 'extract' lists the extensions it reads: edit that list to "
    "read more or fewer files. plan-update with status paused stops it. Once you change this plan assay leaves it "
    "as you made it; set ASSAY_DOCUMENTS_PLAN=off to never have it installed.")
PAUSED_NOTE = (" Paused because the server had no roots configured and fell back to your home directory: set status "
               "active to extract every document there, or start the server with --root for the folders you want.")


def _root_paths(roots: Roots | Iterable[str]) -> list[str]:
    return list(roots.paths) if isinstance(roots, Roots) else [str(r) for r in roots]


def _source_names(paths: list[str]) -> list[str]:
    """A readable, unique source name per root: its folder name (made a valid name), numbered when repeated."""
    names: list[str] = []
    for path in paths:
        base = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.basename(path.rstrip("/")) or "root").strip("-._")[:100]
        base = base or "root"
        name, n = base, 2
        while name in names:
            name, n = f"{base}-{n}", n + 1
        names.append(name)
    return names


def definition_hash(plan: Plan) -> str:
    """The hash of ``plan``'s definition without the mark itself: what says whether anyone changed it."""
    data = plan.to_object()
    prefs = {k: v for k, v in (data.get("preferences") or {}).items() if k != MARK}
    data["preferences"] = prefs
    return "sha256:" + hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:32]


def builtin_plan(roots: Roots | Iterable[str], *, explicit: bool) -> Plan:
    """The "documents" plan for ``roots``: active when the roots were configured (``explicit``), paused when the
    server fell back to the home directory. Marked with the hash of its definition (preference ``generated``)."""
    paths = _root_paths(roots)
    extensions = sorted(EXTENSIONS)
    plan = Plan.from_object({
        "name": PLAN_NAME,
        "description": DESCRIPTION + ("" if explicit else PAUSED_NOTE),
        "mode": "continuous",
        "status": "active" if explicit else "paused",
        "sources": [{"name": name, "type": "filesystem.watch", "config": {"path": path}}
                    for name, path in zip(_source_names(paths), paths)],
        "rules": [{"name": RULE_NAME, "when": {"type": "compare", "field": "extension", "op": "in",
                                               "value": extensions},
                   "outcomes": [{"type": "extract_text"}]}],
    })
    plan.preferences = {MARK: definition_hash(plan)}
    return plan


def plan_roots(engine) -> list[str]:
    """The folders the stored "documents" plan extracts (its filesystem sources' paths, existing ones only): what a
    command-line search covers when no root is given (the server that made the store had them)."""
    row = store_plans.find_plan(engine, name=PLAN_NAME)
    if row is None:
        return []
    try:
        plan = Plan.model_validate(row["definition"])
    except Exception:  # a definition this version cannot read: no roots from it
        return []
    found: list[str] = []
    for source in plan.sources:
        if source.type.startswith("filesystem."):
            for path in source.config.paths:
                path = os.path.abspath(os.path.expanduser(str(path)))
                if os.path.isdir(path) and path not in found:
                    found.append(path)
    return found


def is_generated(plan: Plan) -> bool:
    """Whether ``plan`` is still exactly what assay generated (its mark equals the hash of its definition)."""
    mark = plan.preferences.get(MARK)
    return isinstance(mark, str) and mark == definition_hash(plan)


def _has_run(engine, name: str) -> bool:
    return store_plans.list_executions(engine, plan_name=name, limit=1)[1] > 0


def ensure_builtin_plan(plans, roots: Roots | Iterable[str], settings: Any,
                        documents: DocumentSettings | None = None) -> str:
    """Install, update or leave alone the "documents" plan at server start (see the module docstring); returns what
    it did: "off", "created", "updated", "current" or "changed-by-user".

    ``plans`` is the server's ``flows.plans.service.PlanService``; ``settings`` the server's
    ``mcp_server.config.Settings`` (its ``roots`` are the configured ones: empty means the server fell back to the
    home directory); ``documents`` defaults to ``flows.documents.settings.current()``."""
    documents = documents or DocumentSettings.from_env()
    if not documents.builtin_plan:
        log.info("ASSAY_DOCUMENTS_PLAN=off: the built-in %r plan is not installed", PLAN_NAME)
        return "off"
    explicit = bool(getattr(settings, "roots", None))
    fresh = builtin_plan(roots, explicit=explicit)
    engine = plans.engine
    if store_plans.find_plan(engine, name=PLAN_NAME) is None:
        plans.save(fresh, create=True, write_file=False)
        if fresh.status == "active":
            log.info("installed the %r plan: documents under %s are extracted and indexed in the background",
                     PLAN_NAME, ", ".join(_root_paths(roots)))
            plans.execute(fresh, trigger="manual")
        else:
            log.warning("installed the %r plan paused: no roots are configured, so the server fell back to your home "
                        "directory; plan-update {name: %s, status: active} extracts every document there, or start "
                        "the server with --root", PLAN_NAME, PLAN_NAME)
        return "created"
    stored = plans.load(PLAN_NAME)
    if not is_generated(stored):
        log.info("the %r plan was changed by a user (or came from a plan file): left as it is", PLAN_NAME)
        return "changed-by-user"
    did = "current"
    if stored != fresh:
        plans.save(fresh, create=False, write_file=False)
        log.info("the %r plan follows the roots now: %s (%s)", PLAN_NAME, ", ".join(_root_paths(roots)),
                 fresh.status)
        did = "updated"
    if fresh.status == "active" and not _has_run(engine, PLAN_NAME):
        plans.execute(fresh, trigger="manual")  # scans, extracts, then watches; a plan that ran resumes watching
    return did
