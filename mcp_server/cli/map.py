"""`assay map FILE`: a file's citation map built (or rebuilt) as the ``getStructure`` tool builds it
(flows/citations/service.py ``CitationService.build_map``) and printed as a tree of nodes; the map is stored, so
``resolve`` and `assay cite` use it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from mcp_server.cli.cite import citation_service
from mcp_server.cli.common import OK, from_cwd, out
from mcp_server.tools.citations import map_view
from store.errors import InvalidInput

STRATEGIES = ["auto", "outline", "headings", "chapters", "scenes", "windows"]


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    map_ = sub.add_parser("map", help=summary,
                          description="Build (or rebuild) the citation map of FILE locally and print its nodes "
                                      "(id, title, place, address); the map is stored, so resolve and `assay cite` "
                                      "use it.")
    map_.add_argument("path", metavar="FILE", help="a file inside the roots (absolute, from the current directory, "
                                                   "or relative to its root)")
    map_.add_argument("--strategy", default="auto", choices=STRATEGIES,
                      help="auto (default: the best the file has), outline (PDF bookmarks), headings (Markdown), "
                           "chapters, scenes (video cuts; audio silences), windows")
    map_.add_argument("--window", type=float, metavar="N",
                      help="window size for windows: lines (text), pages (documents), seconds (video, audio)")
    map_.add_argument("--json", action="store_true", help="print the map as JSON (as getStructure)")
    common(map_)
    return map_


def run(args: argparse.Namespace) -> int:
    path = from_cwd(args.path)
    if args.window is not None and args.window <= 0:
        raise InvalidInput("--window takes a positive size", field="--window")
    with citation_service(args) as service:
        view = map_view(service.build_map(path, strategy=args.strategy, window=args.window))
    out(json.dumps(view, indent=2) if args.json else format_map(view))
    return OK


def _place(location: dict[str, Any]) -> str:
    if location.get("pages"):
        first, last = location["pages"][0], location["pages"][-1]
        return f"p. {first}" if first == last else f"pp. {first}-{last}"
    if location.get("lines"):
        return f"lines {location['lines'][0]}-{location['lines'][-1]}"
    if location.get("start") is not None:
        return f"{location['start']:g}-{location.get('end', location['start']):g} s"
    if location.get("bbox"):
        return "bbox " + ",".join(f"{v:g}" for v in location["bbox"])
    return ""


def format_map(resource_map: dict[str, Any]) -> list[str]:
    """A map as a tree: the resource, then one line per node (indented by depth): id, title, place, address."""
    meta = resource_map.get("metadata", {})
    lines = [(f"{resource_map['resource_id']}  {resource_map['type']}  {resource_map['title']!r}  "
              f"({meta.get('origin', '?')}, {resource_map['source_path']})")]

    def walk(nodes: list[dict[str, Any]], depth: int) -> None:
        for node in nodes:
            location = node.get("location", {})
            address = location.get("virtual_address") or ""
            lines.append(f"{'  ' * (depth + 1)}{node['id']}  {node.get('title') or ''}  {_place(location)}  "
                         f"{address}".rstrip())
            walk(node.get("children") or [], depth + 1)

    walk(resource_map.get("nodes", []), 0)
    return lines
