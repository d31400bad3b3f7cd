"""navigate and inspect as plain functions over the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal
from urllib.parse import quote

from sqlalchemy.engine import Engine

from flows.core.roots import Roots
from store import cache
from store import entries as store_entries
from store import metadata as store_metadata
from store.errors import InvalidInput


CONTENT_URI = "synthesis://content/"


def node_uri(path: str) -> str:
    return "synthesis://nodes" + quote(path, safe="/")


def content_url(cache_path: str | None, base: str | None) -> str | None:
    """Where a client fetches a cached artifact (a thumbnail, a timeline frame).

    ``base`` is the HTTP server's address (``http://127.0.0.1:3000``, or the public URL a proxy serves it under):
    the URL is then ``<base>/api/content?path=cache/ab/cd/<hash>.jpg``, reference 000's form, served by
    mcp_server/http.py. Without one (stdio: no HTTP server) it is the resource ``synthesis://content/cache/...``,
    which resources/metadata.py serves as a blob; an MCP client reads it with resources/read.
    """
    if not cache_path:
        return None
    if base:
        return f"{base.rstrip('/')}/api/content?path={quote(cache_path, safe='/')}"
    return CONTENT_URI + cache_path


def navigate_dir(engine: Engine, roots: Roots, *, path: str, limit: int = 100, offset: int = 0, sort: str = "name",
                 desc: bool = False, show_hidden: bool = True, content_base: str | None = None) -> dict[str, Any]:
    """One page of a directory's children. ``show_hidden=False`` leaves out names starting with a dot. Entries
    with a thumbnail carry its ``thumbnailUrl`` (see :func:`content_url`; one query for the page)."""
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
    thumbnails = store_metadata.thumbnails_for(engine, [r["id"] for r in rows if r["kind"] == "file"])
    entries = []
    for r in rows:
        item = {"name": r["name"], "path": r["path"], "size": r["size"], "kind": r["kind"],
                "mtime": store_entries.iso(r["mtime"]), "extension": r["extension"] or None,
                "media_type": r["media_type"]}
        if r["id"] in thumbnails:
            item["thumbnailUrl"] = content_url(thumbnails[r["id"]], content_base)
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


def artifact_values(artifact: dict[str, Any]) -> dict[str, Any]:
    """An artifact's values as the read surface shows them: ``{"metadata": ...}``. The metadata record is stored as
    ``{"metadata": flat fields, "details": the whole extracted record, "hash": ...}`` (flows.classify.executor):
    its flat fields (width, duration, exif.Model...) go under "metadata", the record under "details" (the hash is
    the entry's own field)."""
    value = artifact["value"]
    if artifact["type"] == "metadata" and isinstance(value, dict) and isinstance(value.get("metadata"), dict):
        return {"metadata": value["metadata"], "details": value.get("details") or {}}
    return {"metadata": value}


def artifact_item(artifact: dict[str, Any], content_base: str | None) -> dict[str, Any]:
    """One artifact as inspect lists it: type, mimeType, url (for a file in the cache) and its values under
    "metadata" (a frame's number and timestamp; the metadata record's extracted fields, with the whole record
    under "details")."""
    item: dict[str, Any] = {"type": artifact["type"], "mimeType": artifact["mime_type"]
                            or ("application/json" if artifact["cache_path"] is None else
                                cache.mime_type(artifact["cache_path"]))}
    if artifact["cache_path"]:
        item["url"] = content_url(artifact["cache_path"], content_base)
        item["cachePath"] = artifact["cache_path"]
    item.update(artifact_values(artifact))
    return item


def inspect_entry(engine: Engine, roots: Roots, *, path: str, content_base: str | None = None) -> dict[str, Any]:
    """One entry with its generated artifacts, in reference 000's shape.

    ``metadata`` lists the thumbnail, the timeline frames in order, the timeline's contact sheet and the metadata
    record; ``thumbnailUri`` is the thumbnail's URL, ``timelineUri`` the first frame's (reference 000's
    timeline_00), ``timelineSheetUri`` the contact sheet's (URLs: see :func:`content_url`). ``hash`` is the
    content hash once a classifier extracted metadata, ``duplicates`` how many other entries share it."""
    resolved = roots.resolve(path, follow_last=False)
    entry = store_entries.require_entry(engine, path=resolved)
    artifacts = store_metadata.entry_artifacts(engine, entry_id=entry["id"])
    metadata = [artifact_item(a, content_base) for a in artifacts]
    first: dict[str, dict[str, Any]] = {}
    for a in artifacts:
        first.setdefault(a["type"], a)
    uri = node_uri(resolved)

    def url_of(kind: str) -> str | None:
        return content_url(first[kind]["cache_path"], content_base) if kind in first else None

    result = {
        "path": resolved, "name": entry["name"], "kind": entry["kind"], "size": entry["size"],
        "extension": entry["extension"] or None, "mediaType": entry["media_type"], "mimeType": entry["mime"],
        "modifiedAt": store_entries.iso(entry["mtime"]), "createdAt": store_entries.iso(entry["ctime"]),
        "indexedAt": store_entries.iso(entry["indexed_at"]), "hash": entry["hash"],
        "duplicates": store_metadata.duplicate_count(engine, entry_id=entry["id"], hash_=entry["hash"]),
        "resourceUri": uri, "metadataUri": uri + "/metadata",
        "thumbnailUri": url_of("thumbnail"), "timelineUri": url_of("video-timeline"),
        "timelineSheetUri": url_of("timeline-sheet"),
        "metadataCount": len(metadata), "metadata": metadata, "complete": True, "scanError": None,
    }
    if entry["kind"] == "directory":
        _, result["childCount"] = store_entries.list_children(engine, path=resolved, limit=1)
        result.update(listing_state(entry))
    return result


ImageChoice = Literal["none", "thumbnail", "timeline"]
IMAGE_TYPES = {"thumbnail": "thumbnail", "timeline": "timeline-sheet"}


def entry_image(data_dir: str | Path, inspected: dict[str, Any], which: ImageChoice) -> tuple[bytes | None, str, str]:
    """The bytes of an inspected entry's thumbnail (``which="thumbnail"``) or timeline contact sheet
    (``"timeline"``), its MIME type, and a note for the caller; ``None`` with a note saying how to make one when
    the entry has none (a classifier outcome or rerun-classifier), or when the cache file is gone."""
    wanted = IMAGE_TYPES[which]
    item = next((m for m in inspected["metadata"] if m["type"] == wanted and m.get("cachePath")), None)
    label = "thumbnail" if which == "thumbnail" else "timeline contact sheet"
    if item is None:
        op, how = (("thumbnail", "generate_thumbnail") if which == "thumbnail"
                   else ("timeline", "generate_timeline; videos only"))
        return None, "", (f"{inspected['path']} has no {label}; make one with the rerun-classifier tool (sourcePath, "
                          f"operations: [\"{op}\"]) or a plan with a classifier outcome ({how})")
    file = cache.resolve(data_dir, item["cachePath"])
    if file is None:
        return None, "", (f"the {label} of {inspected['path']} ({item['cachePath']}) is no longer in the cache; run "
                          "rerun-classifier on it to make it again")
    return file.read_bytes(), item["mimeType"], f"{label} of {inspected['path']} attached as an image"
