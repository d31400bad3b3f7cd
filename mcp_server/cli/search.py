"""`assay search QUERY`: the boolean search of the documents' text that the ``search_documents`` tool runs
(flows/documents/search.py ``search``), printed like grep; reads the store beside a running server (SQLite WAL
readers do not block it)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from flows.documents.paths import TOP, DocumentPaths
from flows.documents.search import SORTS, search
from flows.documents.text_index import text_index
from mcp_server.cli.app import document_settings, open_app, reading_settings
from mcp_server.cli.common import NOTHING, OK, from_cwd, out, say
from mcp_server.cli.settings import settings_from
from store.entries import get_entry
from store.errors import DocumentError, InvalidInput

EPILOG = """examples:
  assay search 'dungeon dice'                   # lines holding both words
  assay search '"line of sight" | walls -door' --scope games/rules.pdf
  assay search 'shuffel' --fuzzy --context 0

The summary (on stderr) says how many lines matched and how many documents in scope are not indexed yet (still
being extracted by a running server) or could not be read."""


def add_parser(sub, common, summary: str) -> argparse.ArgumentParser:
    parser = sub.add_parser("search", help=summary,
                            description="Search the extracted text of the documents under the roots (what the "
                                        "built-in 'documents' plan indexes) and print matching lines like grep: "
                                        "path:line: text, context lines as path-line- text, -- between groups. "
                                        "Exit status 0 when something matched, 1 when nothing did, 2 on an error.",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("query", help='words (space = AND), a | b (OR), -word (NOT), "a phrase", parentheses')
    parser.add_argument("--scope", metavar="PATH",
                        help="a folder or a document to search in: relative to the root as the document tools show "
                             "it, an absolute path, or a path from the current directory (default: every root)")
    parser.add_argument("--context", type=int, default=2, metavar="N",
                        help="lines of context before and after each match (default 2)")
    parser.add_argument("--max", type=int, default=100, metavar="N", dest="max_results",
                        help="print at most N matching lines (default 100; the summary counts them all)")
    parser.add_argument("--fuzzy", action="store_true", help="tolerate small typos in the words")
    parser.add_argument("--sort", choices=SORTS, default="relevance",
                        help="relevance (default): the documents that answer best first (BM25), each one's lines in "
                             "order; path: documents in path order")
    common(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    if args.context < 0 or args.max_results < 1:
        raise InvalidInput("--context takes 0 or more lines and --max 1 or more matches", field="--context"
                           if args.context < 0 else "--max")
    settings = settings_from(args)
    documents = document_settings()
    with open_app(reading_settings(settings)) as app:
        paths = DocumentPaths(app.roots, allow_symlinks=documents.allow_symlinks)
        under, entry_id = scope_of(app.engine, paths, args.scope)
        index = text_index(app.engine)
        if index.writer:  # no server keeps it: what the store holds and the index does not yet is indexed first
            queued = len(index.sync(0).queued)
            if queued > 100:
                say(f"indexing the text of {queued} documents first ...")
            index.sync(None)
        outcome = search(app.engine, args.query, under=under, entry_id=entry_id, context_lines=args.context,
                         max_results=args.max_results, fuzzy=args.fuzzy, timeout=documents.search_timeout,
                         display=paths.display, sort=args.sort, snapshot=index.snapshot(0))
    out(format_matches(outcome.matches))
    say(search_summary(outcome))
    return OK if outcome.total_matches else NOTHING


def scope_of(engine, paths, scope: str | None) -> tuple[list[str] | None, int | None]:
    """(under, entry_id) for ``search``: the roots when no scope is given; a folder; or one indexed document. A
    relative scope that exists from the current directory is taken from there (a command-line habit), else as the
    document tools take it, relative to its root."""
    if scope is None:
        return list(paths.roots.paths), None
    resolved = paths.resolve(from_cwd(scope), field="--scope", not_found="SCOPE_NOT_FOUND")
    if resolved == TOP:
        return list(paths.roots.paths), None
    if os.path.isdir(resolved):
        return [resolved], None
    entry = get_entry(engine, path=resolved) if os.path.isfile(resolved) else None
    if entry is None:
        what = "is not indexed yet (index it, or let the 'documents' plan reach it)" if os.path.isfile(resolved) \
            else "does not exist"
        raise DocumentError("SCOPE_NOT_FOUND", f"--scope {scope!r} {what}; give a folder or a document under the "
                                               f"roots ({paths.roots.describe()})", field="--scope",
                            details={"path": scope})
    return None, int(entry["id"])


def format_matches(matches: Any) -> list[str]:
    """The lines grep would print for ``matches`` (LineMatch, in document and line order): ``path:line: text`` for a
    match, ``path-line- text`` for context, ``--`` between groups that do not touch. A line shown as context of one
    match and matching itself is printed once, as a match."""
    lines: list[str] = []
    group: dict[int, tuple[str, bool]] = {}
    document: str | None = None
    any_context = any(m.context_before or m.context_after for m in matches)

    def flush() -> None:
        previous = None
        for number in sorted(group):
            if previous is not None and number > previous + 1 and any_context:
                lines.append("--")
            text, is_match = group[number]
            lines.append(f"{document}{':' if is_match else '-'}{number}{':' if is_match else '-'} {text}")
            previous = number
        group.clear()

    for m in matches:
        if m.document != document:
            if group:
                flush()
                if any_context:
                    lines.append("--")
            document = m.document
        for i, text in enumerate(m.context_before):
            group.setdefault(m.line - len(m.context_before) + i, (text, False))
        group[m.line] = (m.text, True)
        for i, text in enumerate(m.context_after):
            group.setdefault(m.line + 1 + i, (text, False))
    if group:
        flush()
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'s' if n != 1 else ''}"


def search_summary(outcome: Any) -> str:
    """The one line on stderr after a search: totals, and what the results may be missing."""
    documents = len({m.document for m in outcome.matches})
    text = (_count(outcome.total_matches, "matching line")
            + (f", the first {len(outcome.matches)} shown ({_count(documents, 'document')})" if outcome.truncated
               else f" in {_count(documents, 'document')}" if outcome.total_matches else ""))
    if outcome.pending_documents:
        text += f"; {_count(outcome.pending_documents, 'document')} not indexed yet (results may grow)"
    if outcome.failed_documents:
        text += f"; {_count(outcome.failed_documents, 'document')} could not be read"
    return text + f" ({outcome.elapsed_ms:.0f} ms)"
