"""Reference 002's ``index_files`` and ``update_index`` as plan executions, and a collection's statistics.

``index_files(folder)`` builds (or brings up to date) one plan per collection, ``index-files-<collection>``: a
``filesystem.index`` source on the folder and one rule "embed" whose condition lists the extensions asked for
(``extension in [...]``) with the outcome ``embed`` into the collection. It is a plan like any other: plan-list shows
it, its executions are Prefect flow runs with progress, plan-get follows them and index-cancel stops them. The folder
is indexed into the entries store first (incrementally), so that ``maxFiles`` can be applied: when more files match
than ``maxFiles``, only the first ``maxFiles`` by path are embedded (the execution is restricted to them) and the
answer says how many were left out. The embedding itself is the executor's (``flows.semantic.executor``): unchanged
files are skipped, changed ones re-embedded, files gone from the folder leave the collection with their entries.

``update_index(folder, changes)`` does only the named files: each is refreshed in the entries store as the watcher
does (``flows.index.watch_apply.apply``: a file that exists is upserted, one that no longer exists is deleted, and
its chunks and vectors go with it by cascade), then the same plan runs restricted to them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import posixpath
import re
import time
from typing import Any, Callable, Iterable

from sqlalchemy import and_, func, select

from dsl.model import Plan
from flows.core import conditions as cond_sql
from flows.core.roots import Roots
from flows.documents.formats import EXTENSIONS
from flows.index import watch_apply
from flows.index.flow import run_index_job
from flows.index.indexer import kind_of
from flows.plans.selection import candidates_clause
from flows.semantic import encoder as enc
from flows.semantic.executor import model_and_backend
from flows.semantic.model import DEFAULT_COLLECTION
from store import jobs as store_jobs
from store import plans as store_plans
from store import semantic as store_sem
from store.entries import T
from store.errors import DocumentError, FileOperationError, InvalidInput, PathNotAllowed
from store.models import Chunk, Collection, CollectionEntry
from store.plans import R

log = logging.getLogger(__name__)

PLAN_PREFIX = "index-files-"
RULE_NAME = "embed"
SOURCE_NAME = "folder"
MAX_FILES_LIMIT = 1_000_000
MAX_ERRORS = 20  # errors listed in an answer at most
NOTHING_MATCHED = ("nothing matched", "the sources yielded no entries")  # flows.plans.engine's partial messages



class InvalidPath(DocumentError):
    """Reference 002's INVALID_PATH (a folder or file a caller named is missing, not a folder, or outside the
    roots)."""

    def __init__(self, message: str, *, field: str | None = "folderPath", details: dict | None = None) -> None:
        super().__init__("INVALID_PATH", message, field=field, details=details)


C = Collection.__table__
CE = CollectionEntry.__table__
K = Chunk.__table__


# --- validation -----------------------------------------------------------------------------------------------------


def check_options(*, chunk_size: Any, overlap: Any, max_files: Any) -> tuple[int, int, int]:
    """chunkSize, overlap and maxFiles as integers, or InvalidInput naming the option and what it accepts."""
    def integer(value: Any, name: str) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidInput(f"{name} must be a whole number, got {value!r}", field=name)
        return value

    chunk_size, overlap, max_files = (integer(chunk_size, "chunkSize"), integer(overlap, "overlap"),
                                      integer(max_files, "maxFiles"))
    if not 50 <= chunk_size <= 100_000:
        raise InvalidInput(f"chunkSize {chunk_size} is out of range: give 50 to 100000 characters (default 1000)",
                           field="chunkSize")
    if overlap < 0 or overlap >= chunk_size:
        raise InvalidInput(f"overlap {overlap} must be at least 0 and smaller than chunkSize ({chunk_size}); "
                           "the default is 200", field="overlap")
    if not 1 <= max_files <= MAX_FILES_LIMIT:
        raise InvalidInput(f"maxFiles {max_files} is out of range: give 1 to {MAX_FILES_LIMIT:,} (default 10000)",
                           field="maxFiles")
    return chunk_size, overlap, max_files


def check_collection_name(name: Any) -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 200:
        raise InvalidInput(f"collection must be a name of 1 to 200 characters, got {name!r} (default "
                           f"{DEFAULT_COLLECTION!r})", field="collection")
    return name.strip()


def file_extensions(file_types: Iterable[Any] | None) -> list[str]:
    """The extensions ``file_types`` names (".md", "md", "*.md", any case), each one text extraction reads
    (``flows.documents.formats.EXTENSIONS``); None or an empty list: every document format (images are not
    documents here). UNSUPPORTED_FORMAT names the ones it cannot read and lists the supported."""
    if file_types is None:
        return sorted(EXTENSIONS)
    if isinstance(file_types, str):
        file_types = [file_types]
    wanted: list[str] = []
    bad: list[str] = []
    for given in file_types:
        text = given.strip().lower() if isinstance(given, str) else ""
        ext = "." + text.lstrip("*").lstrip(".") if text.lstrip("*.") else ""
        if not ext or ext not in EXTENSIONS:
            bad.append(repr(given))
        elif ext not in wanted:
            wanted.append(ext)
    if bad:
        raise DocumentError("UNSUPPORTED_FORMAT",
                            f"fileTypes {', '.join(bad)} {'is' if len(bad) == 1 else 'are'} not a format text "
                            f"extraction reads; supported: {', '.join(sorted(EXTENSIONS))}", field="fileTypes",
                            details={"unsupported": bad})
    return sorted(wanted) if wanted else sorted(EXTENSIONS)


def resolve_folder(roots: Roots, folder_path: Any) -> str:
    """The canonical absolute path of ``folder_path`` (absolute, or relative to a root): an existing directory inside
    the roots, else INVALID_PATH saying what is wrong and which roots there are."""
    if not isinstance(folder_path, str) or not folder_path.strip():
        raise InvalidPath(f"folderPath must be a folder inside the allowed roots ({roots.describe()}), got "
                          f"{folder_path!r}")
    raw = os.path.expanduser(folder_path.strip())
    if os.path.isabs(raw):
        candidates = [raw]
    else:  # relative to a root: the first root holding it (else the first root, for the message)
        joined = [posixpath.join(root, raw) for root in roots.paths]
        candidates = [p for p in joined if os.path.isdir(p)] or joined[:1]
    try:
        folder = roots.resolve(candidates[0], field="folderPath")
    except (PathNotAllowed, InvalidInput) as exc:
        raise InvalidPath(exc.message,
                          details={"path": folder_path, "roots": list(roots.paths)}) from None
    if not os.path.exists(folder):
        raise InvalidPath(f"folderPath {folder_path!r} does not exist (looked for {folder}); give an existing "
                          f"folder inside the allowed roots ({roots.describe()})", details={"path": folder_path})
    if not os.path.isdir(folder):
        raise InvalidPath(f"folderPath {folder_path!r} is a file, not a folder; give the folder holding it "
                          "(update_index takes single files)", details={"path": folder_path})
    return folder


# --- the plan -------------------------------------------------------------------------------------------------------


def plan_name(collection: str) -> str:
    """``index-files-<collection>``, made a valid plan name (a hash keeps names that had to change apart)."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", collection).strip("-._")
    if safe != collection or len(PLAN_PREFIX + safe) > 128:
        digest = hashlib.sha256(collection.encode()).hexdigest()[:8]
        safe = f"{safe[:100]}-{digest}".lstrip("-")
    return PLAN_PREFIX + safe


def index_plan(collection: str, folder: str, extensions: list[str], *, chunk_size: int, overlap: int,
               model: str | None = None, backend: str | None = None) -> Plan:
    """The plan index_files runs: the folder as a ``filesystem.index`` source, and the rule "embed" (extension in
    ``extensions``) embedding into ``collection``."""
    outcome: dict[str, Any] = {"type": "embed", "collection": collection, "chunk_size": chunk_size,
                               "overlap": overlap}
    if model:
        outcome["model"] = model
    if backend:
        outcome["backend"] = backend
    return Plan.from_object({
        "name": plan_name(collection),
        "description": (f"Made by index_files: embeds the documents under {folder} ({len(extensions)} extension(s): "
                        f"{', '.join(extensions[:12])}{', ...' if len(extensions) > 12 else ''}) into the semantic "
                        f"collection {collection!r} (chunks of {chunk_size} characters, {overlap} overlap) for "
                        "search_documents and search. Each index_files / update_index call on this collection runs "
                        "it again (unchanged files are skipped); plan-execute runs it too."),
        "mode": "oneshot",
        "status": "active",
        "sources": [{"name": SOURCE_NAME, "type": "filesystem.index", "config": {"path": folder}}],
        "rules": [{"name": RULE_NAME, "when": {"type": "compare", "field": "extension", "op": "in",
                                               "value": extensions},
                   "outcomes": [outcome]}],
    })


def _stored_extensions(plans, collection: str) -> list[str] | None:
    """The extensions of the collection's stored index-files plan (what update_index embeds), None without one."""
    if store_plans.find_plan(plans.engine, name=plan_name(collection)) is None:
        return None
    try:
        plan = plans.load(plan_name(collection))
        when = plan.rules[0].when
        return list(when.value) if getattr(when, "field", None) == "extension" else None
    except Exception:  # a plan someone changed into another shape: every document format
        return None


def _check_model(engine, collection: str, model: str, backend: str) -> None:
    """MODEL_MISMATCH before anything runs when the collection holds vectors of another model or backend."""
    existing = store_sem.get_collection(engine, collection)
    if existing is not None and (existing["model"] != model or existing["backend"] != backend):
        # the store's own refusal, with its message naming both models
        store_sem.ensure_collection(engine, collection, model=model, backend=backend, dim=existing["dim"],
                                    chunk_size=existing["chunk_size"], overlap=existing["overlap"])


def _ensure_collection(engine, collection: str, *, model: str, backend: str, chunk_size: int,
                       overlap: int) -> dict:
    """The collection, made if new (the encoder is loaded for its dimension: once per process); MODEL_MISMATCH,
    an unknown model or GPU_NOT_AVAILABLE surface here, to the caller, before any run."""
    _check_model(engine, collection, model, backend)
    existing = store_sem.get_collection(engine, collection)
    if existing is not None:
        return existing
    encoder = enc.get_encoder(model, backend)
    return store_sem.ensure_collection(engine, collection, model=model, backend=backend, dim=encoder.dim,
                                       chunk_size=chunk_size, overlap=overlap)


def _scan(engine, folder: str, plan: Plan, on_progress: Callable[[dict], None] | None = None) -> None:
    """Index ``folder`` into the entries store (incrementally, as the plan's scan stage would); progress goes to
    ``on_progress`` as stage ``index <folder>``."""
    def progress(p) -> None:
        try:
            on_progress({"stage": f"index {folder}", "percent": 0.0, "files": p.files,  # type: ignore[misc]
                         "current_path": p.current_path})
        except Exception:  # a progress consumer never breaks the work
            log.debug("progress hook failed", exc_info=True)

    job_id = store_jobs.create_job(engine, root=folder, params={"plan": plan.name, "source": SOURCE_NAME})
    job = run_index_job(engine, job_id=job_id, root=folder, on_progress=progress if on_progress else None)
    if job["status"] != "completed":
        raise FileOperationError(f"indexing {folder} failed ({job['status']}): {job.get('error_message')}",
                                 field="folderPath")


def _matching(engine, plan: Plan, roots: Roots):
    """The SQL condition of the entries the plan's rule matches among its candidates."""
    push, residual = cond_sql.split(plan.rules[0].when)
    assert residual is None  # extension in [...] runs in SQL
    with engine.connect() as conn:
        return and_(candidates_clause(conn, plan, roots=roots), cond_sql.SqlStore(engine, now=time.time()).clause(push))


# --- index_files ----------------------------------------------------------------------------------------------------


def index_files(plans, folder_path: str, *, chunk_size: int = 1000, overlap: int = 200, max_files: int = 10000,
                file_types: list[str] | None = None, collection: str = DEFAULT_COLLECTION, wait: bool = True,
                on_progress: Callable[[dict], None] | None = None) -> dict[str, Any]:
    """Index the documents under ``folder_path`` into ``collection`` (see the module docstring). With ``wait``
    returns when the execution ended, with its statistics; without, once the folder is indexed in the entries store
    (an incremental walk, needed to apply maxFiles) with ``status: running`` and the execution id, while the
    extraction and embedding run in the background (plan-get follows it, ``plans.cancel(execution_id)`` stops
    it). ``on_progress(dict)`` gets the walk's and then the execution's progress."""
    started = time.perf_counter()
    engine = plans.engine
    chunk_size, overlap, max_files = check_options(chunk_size=chunk_size, overlap=overlap, max_files=max_files)
    collection = check_collection_name(collection)
    extensions = file_extensions(file_types)
    folder = resolve_folder(plans.roots, folder_path)
    model, backend = model_and_backend(engine, collection, None, None)
    coll = _ensure_collection(engine, collection, model=model, backend=backend, chunk_size=chunk_size,
                              overlap=overlap)
    plan = index_plan(collection, folder, extensions, chunk_size=chunk_size, overlap=overlap)
    plans.save(plan, create=None, write_file=False)
    store_sem.add_folder(engine, coll["id"], folder)

    _scan(engine, folder, plan, on_progress)
    where = _matching(engine, plan, plans.roots)
    with engine.connect() as conn:
        matched = conn.execute(select(func.count()).select_from(T).where(where)).scalar_one()
        restrict = None
        if matched > max_files:
            restrict = list(conn.execute(select(T.c.id).where(where).order_by(T.c.path).limit(max_files)).scalars())
    left_out = max(0, matched - max_files)
    note = (f"maxFiles reached: {left_out} matching file(s) left out (the first {max_files} by path were indexed; "
            "raise maxFiles to index them)") if left_out else None

    row = plans.execute(plan, wait=wait, trigger="manual", restrict_ids=restrict, scan=False,
                        on_progress=on_progress)
    base = {"collection": collection, "folder": folder, "plan": plan.name, "execution_id": row["execution_id"],
            "files_matched": matched}
    if file_types:
        base["file_types"] = extensions
    if note:
        base["note"] = note
    if not wait:
        return {**base, "status": "running",
                "message": f"indexing runs as execution {row['execution_id']} of plan {plan.name}: plan-get "
                           "follows it, index-cancel stops it"}
    return {**base, **execution_stats(engine, row, coll["id"], to_do=min(matched, max_files)),
            "elapsed_ms": int((time.perf_counter() - started) * 1000),
            **({"note": note} if note else {})}


def execution_stats(engine, row: dict, collection_id: int, *, to_do: int) -> dict[str, Any]:
    """What an ended index execution did to its collection: files embedded now, unchanged, failed (with the first
    errors), chunks added, totals, speed."""
    with engine.connect() as conn:
        recs = conn.execute(
            select(R.c.entry_id, R.c.status, R.c.detail, T.c.path, CE.c.chunk_count)
            .join(T, T.c.id == R.c.entry_id)
            .outerjoin(CE, and_(CE.c.entry_id == R.c.entry_id, CE.c.collection_id == collection_id))
            .where(R.c.execution_id == row["execution_id"], R.c.outcome_type == "embed")
            .order_by(T.c.path)).all()
    indexed = [r for r in recs if r.status == "applied"]
    failed = [r for r in recs if r.status == "error"]
    totals = collection_totals(engine, collection_id)
    seconds = max((row.get("duration_ms") or 0) / 1000.0, 1e-3)
    status = execution_status(row)
    out = {"status": status, "files_indexed": len(indexed),
           "files_unchanged": max(0, to_do - len(indexed) - len(failed)), "files_failed": len(failed),
           "chunks_added": sum(r.chunk_count or 0 for r in indexed), **totals,
           "files_per_second": round(len(indexed) / seconds, 2) if row.get("duration_ms") else None,
           "errors": [{"path": r.path, "error": r.detail} for r in failed[:MAX_ERRORS]]}
    if row.get("error_message") and status != "success":
        out["message"] = row["error_message"]
    return out


def execution_status(row: dict) -> str:
    """The execution's status as index_files / update_index report it: success, partial (some files failed: see
    errors), error (the message says why), cancelled, or running. A run where no file matched is a success with
    nothing to do (the plan engine calls it partial, "nothing matched")."""
    status, message = row["status"], str(row.get("error_message") or "")
    if status == "error" and message.startswith("cancelled"):
        return "cancelled"
    if status == "partial" and message in NOTHING_MATCHED:
        return "success"
    return status


def collection_totals(engine, collection_id: int) -> dict[str, int]:
    with engine.connect() as conn:
        docs = conn.execute(select(func.count()).select_from(CE).where(CE.c.collection_id == collection_id,
                                                                       CE.c.status == "ok")).scalar_one()
        chunks = conn.execute(select(func.count()).select_from(K).where(K.c.collection_id == collection_id)
                              ).scalar_one()
    return {"documents_total": docs, "chunks_total": chunks}


# --- update_index ---------------------------------------------------------------------------------------------------


def update_index(plans, folder_path: str, changes: list[str], *, collection: str = DEFAULT_COLLECTION
                 ) -> dict[str, Any]:
    """Bring only ``changes`` (paths, absolute or relative to ``folder_path``, inside it) up to date in
    ``collection``, which must exist (INDEX_NOT_FOUND otherwise): files that exist are (re)indexed and embedded if
    they changed, files that no longer exist leave the collection, paths outside the folder are reported in
    ``errors`` (the rest is still done)."""
    started = time.perf_counter()
    engine = plans.engine
    collection = check_collection_name(collection)
    coll = store_sem.require_collection(engine, collection)
    folder = resolve_folder(plans.roots, folder_path)
    if isinstance(changes, str) or not isinstance(changes, (list, tuple)):
        raise InvalidInput("changes must be a list of file paths (absolute or relative to folderPath)",
                           field="changes")
    errors: list[dict[str, str]] = []
    ready: dict[str, tuple] = {}
    gone: set[str] = set()
    for change in changes:
        path, problem = _change_path(plans.roots, folder, change)
        if problem:
            errors.append({"path": str(change), "error": problem})
            continue
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            gone.add(path)
            continue
        except OSError as exc:
            errors.append({"path": str(change), "error": f"FILE_OPERATION_FAILED: {exc.strerror or exc}"})
            continue
        kind = kind_of(st.st_mode)
        if kind == "directory":
            errors.append({"path": str(change), "error": "INVALID_PATH: a folder; list the files that changed, or "
                                                        "run index_files on the folder"})
            continue
        ready[path] = (kind, st.st_size, st.st_mtime_ns, st.st_ino)

    with engine.connect() as conn:
        in_collection = set(conn.execute(
            select(T.c.path).join(CE, CE.c.entry_id == T.c.id)
            .where(CE.c.collection_id == coll["id"], T.c.path.in_(sorted(gone)))).scalars()) if gone else set()
        known = set(conn.execute(select(T.c.path).where(T.c.path.in_(sorted(gone)))).scalars()) if gone else set()
    for path in sorted(gone - known):  # neither on disk nor in the store: most likely a mistyped name
        errors.append({"path": path, "error": "DOCUMENT_NOT_FOUND: neither on disk nor in the index"})
    gone &= known
    removed = len(in_collection)
    applied = watch_apply.apply(engine, deletes=sorted(gone), candidates={}, ready=sorted(ready.items()),
                                scan_id=None)
    with engine.connect() as conn:
        ids = dict(conn.execute(select(T.c.path, T.c.id).where(T.c.path.in_(sorted(ready)))).all()) \
            if ready else {}
    before = store_sem.entry_keys(engine, coll["id"], list(ids.values()))

    counts = {"updated": 0, "added": 0, "removed": removed, "unchanged": len(gone) - removed, "failed": 0}
    execution_id, status = None, "success"
    if ids:
        extensions = _stored_extensions(plans, collection) or sorted(EXTENSIONS)
        plan = index_plan(collection, folder, extensions, chunk_size=coll["chunk_size"], overlap=coll["overlap"],
                          model=coll["model"], backend=coll["backend"])
        plans.save(plan, create=None, write_file=False)
        store_sem.add_folder(engine, coll["id"], folder)
        row = plans.execute(plan, wait=True, trigger="manual", restrict_ids=sorted(ids.values()), scan=False)
        execution_id, status = row["execution_id"], execution_status(row)
        with engine.connect() as conn:
            recs = dict(conn.execute(select(R.c.entry_id, R.c.status).where(
                R.c.execution_id == execution_id, R.c.outcome_type == "embed")).all())
            details = dict(conn.execute(select(R.c.entry_id, R.c.detail).where(
                R.c.execution_id == execution_id, R.c.outcome_type == "embed", R.c.status == "error")).all())
        by_id = {v: k for k, v in ids.items()}
        for entry_id in ids.values():
            record = recs.get(entry_id)
            if record == "applied":
                counts["updated" if entry_id in before else "added"] += 1
            elif record == "error":
                counts["failed"] += 1
                errors.append({"path": by_id[entry_id], "error": details.get(entry_id) or "error"})
            else:
                counts["unchanged"] += 1
        if row["status"] == "error" and row.get("error_message"):
            errors.append({"path": folder, "error": row["error_message"]})
    log.info("update_index %s: %s (%d removed from the store)", collection, counts, applied.removed)
    if status == "success" and (counts["failed"] or errors):
        status = "partial"
    return {"collection": collection, "folder": folder, "status": status, **counts, "errors": errors[:MAX_ERRORS],
            **collection_totals(engine, coll["id"]), "execution_id": execution_id,
            "elapsed_ms": int((time.perf_counter() - started) * 1000)}


def _change_path(roots: Roots, folder: str, change: Any) -> tuple[str, str | None]:
    """(canonical path, None) for a change inside ``folder``, else ("", why not)."""
    if not isinstance(change, str) or not change.strip():
        return "", f"INVALID_PATH: a change must be a file path, got {change!r}"
    raw = os.path.expanduser(change.strip())
    path = raw if os.path.isabs(raw) else posixpath.join(folder, raw)
    try:
        resolved = roots.resolve(path, field="changes", follow_last=False)
    except (PathNotAllowed, InvalidInput) as exc:
        return "", f"INVALID_PATH: {exc.message}"
    if resolved != folder and not resolved.startswith(folder.rstrip("/") + "/"):
        return "", f"INVALID_PATH: {change} is outside the folder {folder}"
    return resolved, None


# --- statistics -----------------------------------------------------------------------------------------------------


def collection_stats(engine, name: str) -> dict[str, Any]:
    """A collection's model, chunking, folders and counts (INDEX_NOT_FOUND naming the collections that exist)."""
    coll = store_sem.require_collection(engine, name)
    totals = collection_totals(engine, coll["id"])
    with engine.connect() as conn:
        folders = conn.execute(select(C.c.folders_json).where(C.c.id == coll["id"])).scalar_one()
    return {"name": coll["name"], "model": coll["model"], "backend": coll["backend"], "dim": coll["dim"],
            "chunk_size": coll["chunk_size"], "overlap": coll["overlap"], "documents": totals["documents_total"],
            "chunks": totals["chunks_total"], "folders": json.loads(folders or "[]"),
            "updated_at": coll.get("updated_at")}
