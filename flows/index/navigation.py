"""navigate and inspect as plain functions over the store."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import Engine

from flows.roots import Roots
from store import artifacts as store_artifacts
from store import entries as store_entries
from store.errors import InvalidInput, NotFound


def node_uri(path: str) -> str:
    return "synthesis://nodes" + quote(path, safe="/")


def navigate_dir(engine: Engine, roots: Roots, *, path: str, limit: int = 100, offset: int = 0, sort: str = "name",
                 desc: bool = False, show_hidden: bool = True) -> dict[str, Any]:
    """One page of a directory's children. ``show_hidden=False`` leaves out names starting with a dot."""
    resolved = roots.resolve(path)
    store_entries.check_sort(sort)
    entry = store_entries.get_entry(engine, path=resolved)
    if entry is None:
        raise store_entries.missing_entry(resolved)
    if entry["kind"] != "directory":
        raise InvalidInput(f"{resolved} is a {entry['kind']}, not a directory; use inspect for a single entry",
                           field="path")
    rows, total = store_entries.list_children(engine, path=resolved, sort=sort, desc=desc, limit=limit, offset=offset,
                                                show_hidden=show_hidden)
    entries = []
    for r in rows:
        item = {"name": r["name"], "path": r["path"], "size": r["size"], "kind": r["kind"],
                "mtime": store_entries.iso(r["mtime"]), "extension": r["extension"] or None,
                "media_type": r["media_type"]}
        if r["scan_error"] is not None:
            item["scanError"] = r["scan_error"]
        entries.append(item)
    return {"path": resolved, "entries": entries, "total": total, "hasMore": offset + len(entries) < total,
            "offset": offset, "limit": limit, **listing_state(entry)}


def listing_state(entry) -> dict[str, Any]:
    """Whether a directory's stored listing is complete, and if not why (unreadable, or a walk that stopped)."""
    error = entry["scan_error"]
    if error is None:
        return {"complete": True, "scanError": None}  # no message key: the shape of a whole listing
    if error.startswith("unreadable"):
        note = (f"{entry['path']} could not be read ({error.removeprefix('unreadable: ')}); the entries shown are "
                "those known from an earlier scan, if any")
    else:
        note = f"{entry['path']} is not fully indexed ({error}); index it again to complete it"
    return {"complete": False, "scanError": error, "message": note}


def inspect_entry(engine: Engine, roots: Roots, *, path: str) -> dict[str, Any]:
    resolved = roots.resolve(path, follow_last=False)
    entry = store_entries.require_entry(engine, path=resolved)
    artifacts = store_artifacts.list_artifacts(engine, entry_id=entry["id"])
    metadata = [{"type": a["type"], "mimeType": a["mime_type"], "cachePath": a["cache_path"],
                 "metadata": a["value"]} for a in artifacts]
    thumb = next((a for a in artifacts if a["type"] == "thumbnail"), None)
    timeline = next((a for a in artifacts if a["type"] == "video-timeline"), None)
    uri = node_uri(resolved)
    result = {
        "path": resolved, "name": entry["name"], "kind": entry["kind"], "size": entry["size"],
        "extension": entry["extension"] or None, "mediaType": entry["media_type"], "mimeType": entry["mime"],
        "modifiedAt": store_entries.iso(entry["mtime"]), "createdAt": store_entries.iso(entry["ctime"]),
        "indexedAt": store_entries.iso(entry["indexed_at"]), "hash": entry["hash"],
        "resourceUri": uri, "metadataUri": uri + "/metadata",
        "thumbnailUri": thumb["cache_path"] if thumb else None,
        "timelineUri": timeline["cache_path"] if timeline else None,
        "metadataCount": len(metadata), "metadata": metadata, "complete": True, "scanError": None,
    }
    if entry["kind"] == "directory":
        _, result["childCount"] = store_entries.list_children(engine, path=resolved, limit=1)
        result.update(listing_state(entry))
    return result
