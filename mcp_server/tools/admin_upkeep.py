"""What the admin tools do to keep the server sound (reference 004's check_integrity, reload_search_index,
clear_cache): check the store against the disk and the index files, repair what can be repaired safely, rebuild the
search indexes, empty caches. Each part is the capability's own (flows.classify.operator, flows.documents.operator,
flows.semantic.operator); this module puts them together and says what was done.

Nothing here deletes a user's file: only the artifact cache's files, the indexes' files and the model exports, all
made again from the store or the models when needed."""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any, Literal

from flows.classify.operator import clear_artifact_cache, repair_artifact_cache
from flows.documents.operator import check_text_index, rebuild_text_index
from flows.documents.query import compile_query
from flows.semantic.operator import (PROBLEMS, check_vector_index, clear_memory, clear_model_exports,
                                     clear_vector_index, rebuild_vector_indexes)
from mcp_server.tools.admin_state import rss_bytes
from mcp_server.tools.database import cache_report
from store.diagnostics import diagnose
from store.textindex.units import stem

if TYPE_CHECKING:
    from mcp_server.app import AssayApp

Index = Literal["text", "vector", "all"]
Cache = Literal["thumbnails", "text-index", "vector-index", "models", "memory"]
FOLLOW = ("get_memory_stats: text_index.pending falls to 0 once the text index is rebuilt; each of "
          "vector_index.collections is ready again once its index is (searches are answered from the store "
          "meanwhile)")


def check_integrity(app: AssayApp, *, fix: bool) -> dict[str, Any]:
    """The store (db-diagnose's checks, the artifact cache among them), the text index and each vector index
    against the store; with ``fix``, the repairs that are safe (see ``_repair``)."""
    engine = app.engine
    store = diagnose(engine, artifact_cache=cache_report(engine))
    text = check_text_index(engine)
    vectors = check_vector_index(engine)
    problems = list(store["warnings"])
    if not text["matches"]:
        problems.append(f"the text index does not match the store ({text['missing']} document(s) missing, "
                        f"{text['stale']} stale, {len(text['corrupt_segments'])} segment(s) failing their "
                        "checksums); fix rebuilds it")
    for v in vectors:
        if v["status"] in PROBLEMS:
            problems.append(f"vector index of collection {v['name']!r}: {v['status']}, {v['detail']}; fix rebuilds it")
    repairs = _repair(app, store["artifact_cache"], text, vectors) if fix else []
    return {"healthy": not problems, "problems": problems, "store": store, "text_index": text,
            "vector_index": vectors, "fix": fix, "repairs": repairs}


def _repair(app: AssayApp, artifact_cache: dict[str, Any], text: dict[str, Any],
            vectors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Orphan cache files removed (the sweep), artifact rows whose file is gone dropped (made again by the
    classifier), a text index or vector file that does not match the store rebuilt from it."""
    engine = app.engine
    repairs = []
    if artifact_cache["orphan_files"] or artifact_cache["missing_files"]:
        done = repair_artifact_cache(engine)
        left = f"; {done['orphans_left']} young one(s) kept while classification runs" if done["orphans_left"] else ""
        repairs.append({"target": "artifact_cache", "action": "removed orphan cache files",
                        "count": done["orphans_removed"],
                        "detail": f"{done['orphan_bytes']} bytes no artifact row pointed at{left}"})
        repairs.append({"target": "artifact_cache", "action": "dropped artifact rows whose file was gone",
                        "count": done["rows_dropped"],
                        "detail": "rerun-classifier (or the next plan execution with a classifier) makes them again"})
    if not text["matches"]:
        rebuilt = rebuild_text_index(engine)
        repairs.append({"target": "text_index", "action": "rebuilding from the store", "count": rebuilt["pending"],
                        "detail": f"{rebuilt['files']} old segment file(s) retired; {rebuilt['pending']} document(s) "
                                  "are being indexed in the background"})
    bad = {v["name"] for v in vectors if v["status"] in PROBLEMS}
    if bad:
        started = rebuild_vector_indexes(engine, names=bad)
        repairs.append({"target": "vector_index", "action": "rebuilding from the store", "count": len(started),
                        "detail": ", ".join(f"{s['name']} ({s['vectors']} vectors)" for s in started)})
    return repairs


def reload_search_index(app: AssayApp, index: Index) -> dict[str, Any]:
    """Rebuild the text index, the vector indexes, or both, from the store, in the background."""
    started = []
    if index in ("text", "all"):
        text = rebuild_text_index(app.engine)
        started.append({"index": "text", "name": None, "pending": text["pending"], "retired_files": text["files"],
                        "retired_bytes": text["bytes"]})
    if index in ("vector", "all"):
        for c in rebuild_vector_indexes(app.engine):
            started.append({"index": "vector", "name": c["name"], "pending": c["vectors"],
                            "retired_files": c["files"], "retired_bytes": c["bytes"]})
    return {"started": started, "background": True, "follow": FOLLOW}


def clear_cache(app: AssayApp, which: Cache) -> dict[str, Any]:
    """Empty one cache and say what was freed."""
    engine = app.engine
    if which == "thumbnails":
        done = clear_artifact_cache(engine)
        return {"cache": which, "files": done["files"], "bytes": done["bytes"], "rows": done["rows"],
                "message": f"deleted {done['rows']} artifact row(s) and {done['files']} cache file(s); thumbnails, "
                           "timelines and excerpts are made again when next asked for (rerun-classifier, resolve)"}
    if which == "text-index":
        text = rebuild_text_index(engine)
        return {"cache": which, "files": text["files"], "bytes": text["bytes"],
                "message": f"the text index is being rebuilt from the store ({text['pending']} document(s)); its "
                           f"{text['files']} old segment file(s) are deleted within a minute"}
    if which == "vector-index":
        freed = clear_vector_index(engine)
        return {"cache": which, **freed.as_dict(),
                "message": "deleted every collection's vector index files; the next search of a collection "
                           "rebuilds its index from the store (answering from the store meanwhile)"}
    if which == "models":
        freed = clear_model_exports()
        return {"cache": which, **freed.as_dict(),
                "message": "deleted the ONNX / OpenVINO exports; each is made again when a backend next needs it "
                           "(a model loaded now keeps running)"}
    return _clear_memory()


def _clear_memory() -> dict[str, Any]:
    """The in-process caches: the semantic index's (loaded indexes, noise floors), the compiled document queries
    and the stems; then a garbage collection. ``bytes``: how much the resident memory went down."""
    before = rss_bytes()
    cleared = clear_memory()
    compile_query.cache_clear()
    stem.cache_clear()
    cleared += ["compiled document queries", "word stems"]
    collected = gc.collect()
    freed = max(before - rss_bytes(), 0)
    return {"cache": "memory", "files": 0, "bytes": freed, "cleared": cleared,
            "message": f"emptied {len(cleared)} in-process caches and collected {collected} objects; they fill "
                       "again as searches run"}
