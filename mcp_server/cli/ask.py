"""`assay ask QUESTION`: the semantic / keyword / hybrid search the ``search`` tool runs
(flows/semantic/search.py ``search``), its best passages printed with their places; reads the store and the
collection's vector index beside a running server (SQLite WAL readers do not block it; the index file is only
read)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from flows.documents.paths import TOP, DocumentPaths
from flows.semantic.search import Filters, search
from mcp_server.cli.app import open_app, reading_settings
from mcp_server.cli.common import NOTHING, OK, from_cwd, out, say
from mcp_server.cli.settings import settings_from

EPILOG = """examples:
  assay ask 'how do figures move on the board?'
  assay ask 'INV-2024-0042' --mode keyword
  assay ask 'termination clauses' --set contracts --where 'mtime > now - 30d' --path ~/work/legal

Each hit: its rank, the file, where in it (p. 3, pp. 3-4 or lines 10-20), its scores and the start of the passage.
The summary (on stderr) says how many hits and which collection answered. Exit status 0 when something was found,
1 when nothing was, 2 on an error (e.g. INDEX_NOT_FOUND before anything was indexed)."""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    ask = sub.add_parser("ask", help=summary,
                         description="Search the semantic index (what index_files and embed outcomes build) for "
                                     "QUESTION and print the best passages with their places.",
                         epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ask.add_argument("question", help="a question or a few words, in any wording")
    ask.add_argument("--collection", metavar="NAME",
                     help="the collection to search (default: 'default', or the only one there is)")
    ask.add_argument("--mode", choices=["hybrid", "semantic", "keyword"], default="hybrid",
                     help="semantic (meaning), keyword (words, BM25) or hybrid (both fused by rank; the default)")
    ask.add_argument("--limit", type=int, default=5, metavar="N", help="print the best N passages (default 5, "
                                                                       "at most 100)")
    ask.add_argument("--min-score", type=float, metavar="S",
                     help="only passages at least this similar in meaning (cosine 0..1; semantic and hybrid); "
                          "default: a cut-off fitted to the model (above what unrelated text scores, at least half "
                          "the best passage's margin over that)")
    ask.add_argument("--set", action="append", metavar="SET", dest="sets",
                     help="only files in this resource set or its child sets (repeatable: any of them)")
    ask.add_argument("--where", metavar="CONDITION",
                     help="only files matching a plan-language condition, e.g. 'media_type = document and "
                          "mtime > now - 30d'")
    ask.add_argument("--path", action="append", metavar="PATH", dest="paths",
                     help="only files at or under PATH (inside a root; repeatable: any of them)")
    common(ask)
    return ask


def run(args: argparse.Namespace) -> int:
    with open_app(reading_settings(settings_from(args))) as app:
        paths = DocumentPaths(app.roots)
        filters = Filters(sets=args.sets, condition=args.where, paths=_scoped(paths, args.paths))
        result = search(app.engine, args.question, collection=args.collection, mode=args.mode, limit=args.limit,
                        min_score=args.min_score, filters=None if filters.empty() else filters)
    out(format_hits(result["hits"], result["mode"], paths.display))
    say(_summary(result))
    return OK if result["hits"] else NOTHING


def _scoped(paths, given: list[str] | None) -> list[str] | None:
    """The --path values as absolute paths inside the roots: shown (root-relative) forms, absolute paths, or paths
    from the current directory when they exist there."""
    if not given:
        return None
    scoped: list[str] = []
    for path in given:
        resolved = paths.resolve(from_cwd(path), field="--path", not_found="SCOPE_NOT_FOUND")
        scoped.extend(paths.roots.paths if resolved == TOP else [resolved])
    return scoped


def _summary(result: dict[str, Any]) -> str:
    n = len(result["hits"])
    bound = ""
    if result.get("min_score") is not None:
        bound = f", similarity >= {result['min_score']:.2f}" + (" (fitted to the model)"
                                                                 if result.get("min_score_fitted") else "")
    text = (f"{n} hit{'s' if n != 1 else ''} in collection {result['collection']!r} ({result['mode']}"
            + (f", {result['candidates']} passages passed the filters" if result["candidates"] is not None else "")
            + f"{bound}, {result['elapsed_ms']:.0f} ms)")
    if result.get("note"):
        text += f"; {result['note']}"
    return text


def hit_place(hit: Any) -> str:
    """Where a hit is, for a person: ``p. 3`` / ``pp. 3-4`` in paged documents, else ``lines 10-20``."""
    if hit.page is not None:
        end = hit.page_end or hit.page
        return f"p. {hit.page}" if end == hit.page else f"pp. {hit.page}-{end}"
    if hit.line_start == hit.line_end:
        return f"line {hit.line_start}"
    return f"lines {hit.line_start}-{hit.line_end}"


def hit_scores(hit: Any, mode: str) -> str:
    """The scores of a hit: the cosine (``similarity``), the full-text score and, in hybrid mode, the fused score
    with the rank each side gave it."""
    parts = []
    if mode == "hybrid":
        parts.append(f"fused {hit.score:.4f}")
    if hit.semantic_score is not None:
        parts.append(f"similarity {hit.semantic_score:.3f}" + (f" (#{hit.semantic_rank})" if mode == "hybrid"
                                                                 and hit.semantic_rank else ""))
    if hit.keyword_score is not None:
        parts.append(f"keyword {hit.keyword_score:.3g}" + (f" (#{hit.keyword_rank})" if mode == "hybrid" else ""))
    return ", ".join(parts)


def excerpt(text: str, width: int = 160) -> str:
    """The passage on one line (whitespace collapsed), cut at a word near ``width`` characters."""
    flat = " ".join(text.split())
    if len(flat) <= width:
        return flat
    cut = flat[:width]
    space = cut.rfind(" ")
    return (cut[:space] if space > width // 2 else cut) + " ..."


def format_hits(hits: Any, mode: str, display: Callable[[str], str] = lambda path: path) -> list[str]:
    """Two lines per hit: ``rank. path  place  [scores]``, then the excerpt indented."""
    lines = []
    for rank, hit in enumerate(hits, 1):
        lines.append(f"{rank}. {display(hit.path)}  {hit_place(hit)}  [{hit_scores(hit, mode)}]")
        lines.append(f"   {excerpt(hit.text)}")
    return lines
