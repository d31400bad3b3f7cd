"""The `assay` command line: `assay serve` runs the MCP server, `assay index PATH` indexes with a progress bar.

This module is the only place that writes to the terminal; everything else logs (to stderr).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import signal
import sys
import threading
import time
from typing import Any, Callable, NoReturn

from store.errors import AssayError, InvalidInput

DESCRIPTION = """assay: a declarative workflow engine for files, exposed over MCP.
Index folders, group files into resource sets, query and navigate them, from any MCP client."""

EPILOG = """examples:
  assay serve                                   # stdio, for an MCP client that launches it
  assay serve --transport http --port 3000 --root ~/Photos
  assay index ~/Photos                          # index once, with a progress bar
  assay classify ~/Photos --operations thumbnail metadata   # thumbnails, metadata, hashes of the indexed files
  assay serve --config assay.yaml               # settings from YAML (server.port, server.cors_origins, ...)
  assay serve --plans-dir plans/                # plan files in git: loaded, reloaded on change, written back
  assay plan validate examples/plans/* --root examples/corpus     # every problem with its place
  assay plan run examples/plans/tidy.yaml --root examples/corpus  # run once as a Prefect flow, with progress
  assay search 'dice | squares -diagonal' --scope games      # the documents' text, printed like grep
  assay ask 'how do figures move?' --set games  # the semantic index: best passages with their pages / lines
  assay cite 'doc://rules#pages=3-4' -o rules-p3-4.pdf   # a citation into its file, with the source's hash
  assay map games/rules.pdf                     # a file's citation map: its tree of nodes and their addresses

environment: ASSAY_DATA_DIR, ASSAY_DATABASE_URL, ASSAY_ROOTS (os.pathsep-separated), CORS_ORIGINS (comma-separated),
ASSAY_ALLOWED_HOSTS (comma-separated), ASSAY_TOOL_GROUPS (comma-separated). Command-line options override the environment, which overrides --config."""


SEARCH_EPILOG = """examples:
  assay search 'dungeon dice'                   # lines holding both words
  assay search '"line of sight" | walls -door' --scope games/rules.pdf
  assay search 'shuffel' --fuzzy --context 0

The summary (on stderr) says how many lines matched and how many documents in scope are not indexed yet (still
being extracted by a running server) or could not be read."""


ASK_EPILOG = """examples:
  assay ask 'how do figures move on the board?'
  assay ask 'INV-2024-0042' --mode keyword
  assay ask 'termination clauses' --set contracts --where 'mtime > now - 30d' --path ~/work/legal

Each hit: its rank, the file, where in it (p. 3, pp. 3-4 or lines 10-20), its scores and the start of the passage.
The summary (on stderr) says how many hits and which collection answered. Exit status 0 when something was found,
1 when nothing was, 2 on an error (e.g. INDEX_NOT_FOUND before anything was indexed)."""


CITE_EPILOG = """addresses (ID: a resource id, as `assay map` or the listResources tool shows it):
  doc://ID#pages=3-5   doc://ID#pages=1,3,7     pages, 1-based, inclusive: a new PDF
  video://ID#t=192-230 video://ID#t=03:12-03:40 seconds (or MM:SS, HH:MM:SS): a clip (stream copy; --exact
                                                 re-encodes for frame-accurate cuts)
  audio://ID#t=10-20                             a clip
  image://ID#bbox=0.2,0.2,0.8,0.8                x1,y1,x2,y2 as fractions of width and height: a crop
  text://ID#lines=10-20                          lines, 1-based, inclusive: a text file

examples:
  assay cite 'doc://annual_report_2023#pages=2-3' -o excerpt.pdf
  assay cite 'video://lecture#t=00:04-00:09' --json
  assay cite 'text://notes#lines=1-5' --virtual      # check the address against the file, extract nothing

Prints the canonical address, the source file, its content hash and the output file (the content cache's copy; -o
copies it to FILE). Exit status 0 when resolved, 2 on an error (the message on stderr: INVALID_ADDRESS, ...)."""


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--root", action="append", metavar="DIR", dest="roots",
                   help="a directory callers may touch (repeatable; default: ASSAY_ROOTS or your home directory)")
    p.add_argument("--data-dir", metavar="DIR", help="where the store and caches live (default: ~/.assay)")
    p.add_argument("--config", metavar="FILE", help="YAML settings file")
    p.add_argument("--database-url", metavar="URL",
                   help="SQLAlchemy URL of the store (default: SQLite in the data dir); e.g. postgresql+psycopg://...")
    p.add_argument("--log-level", default=os.environ.get("ASSAY_LOG_LEVEL", "INFO"),
                   choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level (logs go to stderr)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="assay", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    serve = sub.add_parser("serve", help="run the MCP server (stdio or Streamable HTTP at /mcp)",
                           description="Run the MCP server.", epilog=EPILOG,
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    serve.add_argument("--transport", choices=["stdio", "http"], help="stdio (default) or http (Streamable HTTP)")
    serve.add_argument("--host", help="address to bind for http (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port for http (default 3000)")
    serve.add_argument("--allowed-hosts", metavar="H1,H2",
                       help="Host header values the http server accepts besides the loopback names (required when "
                            "--host is not a loopback address; '*': any)")
    serve.add_argument("--index", action="append", metavar="PATH", default=[],
                       help="index PATH (inside a root) in the background once the server starts (repeatable)")
    serve.add_argument("--tool-groups", metavar="G1,G2", help="only list these tool groups (default: all)")
    serve.add_argument("--plans-dir", metavar="DIR", help="load plan files from DIR, reload them on change, and "
                                                          "write plans created over MCP back to it")
    serve.add_argument("--no-prefect", action="store_true",
                       help="run jobs as plain functions instead of Prefect flows (no flow runs recorded)")
    _common(serve)

    index = sub.add_parser("index", help="index a path into the store, with a progress bar",
                           description="Index PATH into the store (as a Prefect flow) and print a summary.")
    index.add_argument("path", help="file or directory to index")
    index.add_argument("--force", action="store_true", help="re-index even if scanned within --max-age")
    index.add_argument("--max-age", type=float, default=0, metavar="SECONDS",
                       help="skip if scanned this recently (default 0: always index)")
    index.add_argument("--follow-symlinks", action="store_true", help="follow symbolic links (off by default)")
    index.add_argument("--no-prefect", action="store_true", help="run as a plain function, not a Prefect flow")
    _common(index)

    classify = sub.add_parser("classify", help="thumbnails, timelines, metadata and hashes of indexed files",
                              description="Classify the indexed files at PATH (a file, or every file under a "
                                          "directory) and print a summary. Index PATH first.")
    classify.add_argument("path", help="indexed file or directory")
    classify.add_argument("--operations", nargs="+", metavar="OP", default=None,
                          help="thumbnail, timeline, metadata, hash, all (default: all)")
    classify.add_argument("--force", action="store_true",
                          help="redo work already done on unchanged files (default: skip it)")
    classify.add_argument("--no-prefect", action="store_true", help="run as a plain function, not a Prefect flow")
    _common(classify)

    search = sub.add_parser("search", help="search the text of the indexed documents, printing matches like grep",
                            description="Search the extracted text of the documents under the roots (what the "
                                        "built-in 'documents' plan indexes) and print matching lines like grep: "
                                        "path:line: text, context lines as path-line- text, -- between groups. "
                                        "Exit status 0 when something matched, 1 when nothing did, 2 on an error.",
                            epilog=SEARCH_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    search.add_argument("query", help='words (space = AND), a | b (OR), -word (NOT), "a phrase", parentheses')
    search.add_argument("--scope", metavar="PATH",
                        help="a folder or a document to search in: relative to the root as the document tools show "
                             "it, an absolute path, or a path from the current directory (default: every root)")
    search.add_argument("--context", type=int, default=2, metavar="N",
                        help="lines of context before and after each match (default 2)")
    search.add_argument("--max", type=int, default=100, metavar="N", dest="max_results",
                        help="print at most N matching lines (default 100; the summary counts them all)")
    search.add_argument("--fuzzy", action="store_true", help="tolerate small typos in the words")
    _common(search)

    ask = sub.add_parser("ask", help="ask the semantic index a question in words, printing the best passages",
                         description="Search the semantic index (what index_files and embed outcomes build) for "
                                     "QUESTION and print the best passages with their places.",
                         epilog=ASK_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    ask.add_argument("question", help="a question or a few words, in any wording")
    ask.add_argument("--collection", metavar="NAME",
                     help="the collection to search (default: 'default', or the only one there is)")
    ask.add_argument("--mode", choices=["hybrid", "semantic", "keyword"], default="hybrid",
                     help="semantic (meaning), keyword (words, BM25) or hybrid (both fused by rank; the default)")
    ask.add_argument("--limit", type=int, default=5, metavar="N", help="print the best N passages (default 5, "
                                                                       "at most 100)")
    ask.add_argument("--min-score", type=float, metavar="S",
                     help="only passages at least this similar in meaning (cosine 0..1; semantic and hybrid)")
    ask.add_argument("--set", action="append", metavar="SET", dest="sets",
                     help="only files in this resource set or its child sets (repeatable: any of them)")
    ask.add_argument("--where", metavar="CONDITION",
                     help="only files matching a plan-language condition, e.g. 'media_type = document and "
                          "mtime > now - 30d'")
    ask.add_argument("--path", action="append", metavar="PATH", dest="paths",
                     help="only files at or under PATH (inside a root; repeatable: any of them)")
    _common(ask)

    cite = sub.add_parser("cite", help="resolve a citation address into its file: PDF pages, a clip, a crop, lines",
                          description="Resolve ADDRESS against the files under the roots, verify it against the "
                                      "source (its content hash) and extract the part it names into the content "
                                      "cache.",
                          epilog=CITE_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    cite.add_argument("address", help="doc://ID#pages=..., video://ID#t=..., audio://ID#t=..., "
                                      "image://ID#bbox=..., text://ID#lines=...")
    cite.add_argument("-o", "--output", metavar="FILE", help="copy the extracted file to FILE (replaced if it exists)")
    cite.add_argument("--virtual", action="store_true", help="only check and print the address; extract nothing")
    cite.add_argument("--exact", action="store_true", help="video/audio: re-encode for frame-accurate cuts")
    cite.add_argument("--allow-stale", action="store_true",
                      help="resolve although the file changed since an agent supplied its map")
    cite.add_argument("--json", action="store_true", help="print the whole answer as JSON (as the resolve tool)")
    _common(cite)

    map_ = sub.add_parser("map", help="build a file's citation map and print its tree of nodes",
                          description="Build (or rebuild) the citation map of FILE locally and print its nodes "
                                      "(id, title, place, address); the map is stored, so resolve and `assay cite` "
                                      "use it.")
    map_.add_argument("path", metavar="FILE", help="a file inside the roots (absolute, from the current directory, "
                                                   "or relative to its root)")
    map_.add_argument("--strategy", default="auto", choices=["auto", "outline", "headings", "chapters", "scenes",
                                                             "windows"],
                      help="auto (default: the best the file has), outline (PDF bookmarks), headings (Markdown), "
                           "chapters, scenes (video cuts; audio silences), windows")
    map_.add_argument("--window", type=float, metavar="N",
                      help="window size for windows: lines (text), pages (documents), seconds (video, audio)")
    map_.add_argument("--json", action="store_true", help="print the map as JSON (as getStructure)")
    _common(map_)

    from mcp_server import plan_cli

    plan_cli.add_parser(sub, _common)
    return parser


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for noisy in ("httpx", "httpcore", "uvicorn.access", "sqlalchemy", "mcp.server.lowlevel"):
        logging.getLogger(noisy).setLevel(logging.WARNING)


def _settings(args: argparse.Namespace, **extra):
    from mcp_server.config import load_settings

    cli = {"roots": args.roots, "data_dir": args.data_dir, "database_url": args.database_url, **extra}
    return load_settings(cli, config_file=args.config)


def _bar(percent: Callable[[Any], float], describe: Callable[[Any], str], stream=sys.stderr):
    """A progress bar on stderr, redrawn at most ten times a second (and at 100%): ``percent(p)`` and
    ``describe(p)`` read a progress report."""
    width = 30
    last = [0.0]

    def show(p) -> None:
        now = time.monotonic()
        done = percent(p)
        if now - last[0] < 0.1 and done < 100:
            return
        last[0] = now
        filled = int(width * done / 100)
        stream.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done:5.1f}%  {describe(p)}")
        stream.flush()

    return show


def _progress_bar(stream=sys.stderr):
    """The bar of an index job (IndexProgress reports)."""
    return _bar(lambda p: p.percent,
                lambda p: f"{p.files} files  {p.directories} dirs  {p.total_size / 1e6:,.1f} MB", stream)


@contextlib.contextmanager
def _local_runner(settings):
    """A JobRunner on the store for a job this command runs itself (no MCP server, no plans: a command-line call
    starts fast). Jobs a server on the same store left running are not reaped: that server may be running them."""
    from flows.runner import JobRunner
    from mcp_server.config import prepare_environment
    from store.engine import get_engine

    prepare_environment(settings)  # also tells the capabilities where the data dir is (the classifier's cache)
    engine = get_engine(settings.db_url)
    runner = JobRunner(engine, settings.db_url, use_prefect=settings.use_prefect)
    try:
        yield runner
    finally:
        runner.shutdown()
        engine.dispose()


def cmd_index(args: argparse.Namespace) -> int:
    from flows.roots import Roots

    settings = _settings(args, use_prefect=not args.no_prefect)
    root = Roots.of(settings.effective_roots).resolve(os.path.abspath(os.path.expanduser(args.path)), field="path")
    result = _index_via_server(settings, root, args) if settings.use_prefect else None
    if result is None:
        result = _index_here(settings, root, args)
    sys.stderr.write("\n")
    if result.get("skipped"):
        print(result["skipReason"])
        return 0
    print(f"{result['status']}: {result['files']} files, {result['directories']} directories, "
          f"{result['totalSize']:,} bytes, {result['removed']} removed, in {result['durationMs']} ms "
          f"(job {result['jobId']})")
    for issue in result.get("issues") or []:
        print(f"  skipped {issue['path']}: {issue['reason']}")
    if result.get("error"):
        print(f"  {result['error']}")
    return 0 if result["status"] == "completed" else 1


def _index_via_server(settings, root: str, args: argparse.Namespace) -> dict | None:
    """Hand the job to an `assay serve` on this data dir (mcp_server/control.py): it runs it as a Prefect flow with
    Prefect already warm, and this process never imports Prefect. None when no server takes it."""
    from mcp_server import control

    log = logging.getLogger("assay")

    def accepted(where: str, info: dict) -> None:
        log.info("indexing handed to the assay server at %s (pid %s)", where, info.get("pid"))

    try:
        return control.index_via_server(settings.data_dir, path=root, force=args.force, max_age=args.max_age,
                                        follow_symlinks=args.follow_symlinks, store=settings.db_url,
                                        on_progress=_progress_bar(), on_accepted=accepted)
    except control.NoServer as why:
        log.log(logging.INFO if why.refused else logging.DEBUG, "indexing here: %s", why)
        return None


def _index_here(settings, root: str, args: argparse.Namespace) -> dict:
    from flows.index.service import index_path

    with _local_runner(settings) as runner:
        return index_path(runner, root=root, async_=False, force=args.force, max_age=args.max_age,
                          follow_symlinks=args.follow_symlinks, on_progress=_progress_bar())


def _classify_bar(stream=sys.stderr):
    """The bar of a classify job (dict reports: percent, files, total, errors)."""
    return _bar(lambda p: p["percent"], lambda p: f"{p['files']}/{p['total']} files  {p['errors']} with errors",
                stream)


def cmd_classify(args: argparse.Namespace) -> int:
    from flows.classify.service import check_operations, classify_path
    from flows.roots import Roots

    settings = _settings(args, use_prefect=not args.no_prefect)
    path = Roots.of(settings.effective_roots).resolve(os.path.abspath(os.path.expanduser(args.path)), field="path")
    operations = check_operations(args.operations)
    result = _classify_via_server(settings, path, list(operations), args) if settings.use_prefect else None
    if result is None:
        with _local_runner(settings) as runner:
            result = classify_path(runner, path=path, operations=operations, force=args.force, async_=False,
                                   on_progress=_classify_bar())
    sys.stderr.write("\n")
    print(f"{result['status']}: {result['files']} files, {result['errors']} with errors, "
          f"operations {', '.join(result['operations'])}, in {result['durationMs']} ms (job {result['id']})")
    for issue in result.get("issues") or []:
        print(f"  {issue['path']}: {issue['reason']}")
    if result.get("error"):
        print(f"  {result['error']}")
    return 0 if result["status"] == "completed" else 1


def _classify_via_server(settings, path: str, operations: list[str], args: argparse.Namespace) -> dict | None:
    """Hand the classify job to an `assay serve` on this data dir, whose worker pool and Prefect are warm; None when
    no server takes it (then it runs here)."""
    from mcp_server import control

    log = logging.getLogger("assay")
    try:
        return control.classify_via_server(
            settings.data_dir, path=path, operations=operations, force=args.force, store=settings.db_url,
            on_progress=_classify_bar(),
            on_accepted=lambda where, info: log.info("classification handed to the assay server at %s (pid %s)",
                                                     where, info.get("pid")))
    except control.NoServer as why:
        log.log(logging.INFO if why.refused else logging.DEBUG, "classifying here: %s", why)
        return None


def _search_scope(engine, paths, scope: str | None) -> tuple[list[str] | None, int | None]:
    """(under, entry_id) for ``search``: the roots when no scope is given; a folder; or one indexed document. A
    relative scope that exists from the current directory is taken from there (a command-line habit), else as the
    document tools take it, relative to its root."""
    from flows.documents.paths import TOP
    from store.entries import get_entry
    from store.errors import DocumentError

    if scope is None:
        return list(paths.roots.paths), None
    given = scope
    if not os.path.isabs(os.path.expanduser(scope)) and os.path.exists(scope):
        given = os.path.abspath(scope)
    resolved = paths.resolve(os.path.expanduser(given), field="--scope", not_found="SCOPE_NOT_FOUND")
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


def format_matches(matches) -> list[str]:
    """The lines grep would print for ``matches`` (LineMatch, in document and line order): ``path:line: text`` for a
    match, ``path-line- text`` for context, ``--`` between groups that do not touch. A line shown as context of one
    match and matching itself is printed once, as a match."""
    out: list[str] = []
    group: dict[int, tuple[str, bool]] = {}
    document: str | None = None
    any_context = any(m.context_before or m.context_after for m in matches)

    def flush() -> None:
        previous = None
        for number in sorted(group):
            if previous is not None and number > previous + 1 and any_context:
                out.append("--")
            text, is_match = group[number]
            out.append(f"{document}{':' if is_match else '-'}{number}{':' if is_match else '-'} {text}")
            previous = number
        group.clear()

    for m in matches:
        if m.document != document:
            if group:
                flush()
                if any_context:
                    out.append("--")
            document = m.document
        for i, text in enumerate(m.context_before):
            group.setdefault(m.line - len(m.context_before) + i, (text, False))
        group[m.line] = (m.text, True)
        for i, text in enumerate(m.context_after):
            group.setdefault(m.line + 1 + i, (text, False))
    if group:
        flush()
    return out


def search_summary(outcome) -> str:
    """The one line on stderr after a search: totals, and what the results may be missing."""
    documents = len({m.document for m in outcome.matches})
    text = (f"{outcome.total_matches} matching line{'s' if outcome.total_matches != 1 else ''}"
            + (f", the first {len(outcome.matches)} shown ({documents} document{'s' if documents != 1 else ''})"
               if outcome.truncated else
               f" in {documents} document{'s' if documents != 1 else ''}" if outcome.total_matches else ""))
    if outcome.pending_documents:
        text += (f"; {outcome.pending_documents} document{'s' if outcome.pending_documents != 1 else ''} not "
                 "indexed yet (results may grow)")
    if outcome.failed_documents:
        text += (f"; {outcome.failed_documents} document{'s' if outcome.failed_documents != 1 else ''} could not "
                 "be read")
    return text + f" ({outcome.elapsed_ms:.0f} ms)"


def cmd_search(args: argparse.Namespace) -> int:
    """`assay search`: reads the store directly (beside a running server: SQLite WAL readers do not block it)."""
    from flows.documents.paths import DocumentPaths
    from flows.documents.search import search
    from flows.documents.service import plan_roots
    from flows.documents.settings import DocumentSettings
    from flows.roots import Roots
    from store.engine import make_engine

    if args.context < 0 or args.max_results < 1:
        raise InvalidInput("--context takes 0 or more lines and --max 1 or more matches", field="--context"
                           if args.context < 0 else "--max")
    settings = _settings(args)
    try:
        documents = DocumentSettings.from_env()
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    engine = make_engine(settings.db_url)
    try:
        # no --root: the folders the server's built-in documents plan covers, else the home directory
        roots = settings.roots or plan_roots(engine) or settings.effective_roots
        paths = DocumentPaths(Roots.of(roots), allow_symlinks=documents.allow_symlinks)
        under, entry_id = _search_scope(engine, paths, args.scope)
        outcome = search(engine, args.query, under=under, entry_id=entry_id, context_lines=args.context,
                         max_results=args.max_results, fuzzy=args.fuzzy, timeout=documents.search_timeout,
                         display=paths.display)
    finally:
        engine.dispose()
    for line in format_matches(outcome.matches):
        print(line)
    sys.stdout.flush()
    print(search_summary(outcome), file=sys.stderr)
    return 0 if outcome.total_matches else 1


def hit_place(hit) -> str:
    """Where a hit is, for a person: ``p. 3`` / ``pp. 3-4`` in paged documents, else ``lines 10-20``."""
    if hit.page is not None:
        end = hit.page_end or hit.page
        return f"p. {hit.page}" if end == hit.page else f"pp. {hit.page}-{end}"
    if hit.line_start == hit.line_end:
        return f"line {hit.line_start}"
    return f"lines {hit.line_start}-{hit.line_end}"


def hit_scores(hit, mode: str) -> str:
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


def format_hits(hits, mode: str, display=lambda path: path) -> list[str]:
    """Two lines per hit: ``rank. path  place  [scores]``, then the excerpt indented."""
    out = []
    for rank, hit in enumerate(hits, 1):
        out.append(f"{rank}. {display(hit.path)}  {hit_place(hit)}  [{hit_scores(hit, mode)}]")
        out.append(f"   {excerpt(hit.text)}")
    return out


def _ask_paths(paths, given: list[str] | None) -> list[str] | None:
    """The --path values as absolute paths inside the roots: shown (root-relative) forms, absolute paths, or paths
    from the current directory when they exist there."""
    from flows.documents.paths import TOP

    if not given:
        return None
    out = []
    for path in given:
        if not os.path.isabs(os.path.expanduser(path)) and os.path.exists(path):
            path = os.path.abspath(path)
        resolved = paths.resolve(os.path.expanduser(path), field="--path", not_found="SCOPE_NOT_FOUND")
        out.extend(paths.roots.paths if resolved == TOP else [resolved])
    return out


def cmd_ask(args: argparse.Namespace) -> int:
    """`assay ask`: reads the store and the collection's vector index directly (beside a running server: SQLite WAL
    readers do not block it, and the index file is only read)."""
    from flows.documents.paths import DocumentPaths
    from flows.documents.service import plan_roots
    from flows.roots import Roots
    from flows.semantic.search import Filters, search
    from mcp_server.config import prepare_environment
    from store.engine import make_engine

    settings = _settings(args)
    prepare_environment(settings)  # the model offline, the data dir's caches
    engine = make_engine(settings.db_url)
    try:
        roots = settings.roots or plan_roots(engine) or settings.effective_roots
        paths = DocumentPaths(Roots.of(roots))
        filters = Filters(sets=args.sets, condition=args.where, paths=_ask_paths(paths, args.paths))
        result = search(engine, args.question, collection=args.collection, mode=args.mode, limit=args.limit,
                        min_score=args.min_score, filters=None if filters.empty() else filters)
    finally:
        engine.dispose()
    for line in format_hits(result["hits"], result["mode"], paths.display):
        print(line)
    sys.stdout.flush()
    n = len(result["hits"])
    summary = (f"{n} hit{'s' if n != 1 else ''} in collection {result['collection']!r} ({result['mode']}"
               + (f", {result['candidates']} passages passed the filters" if result["candidates"] is not None else "")
               + f", {result['elapsed_ms']:.0f} ms)")
    if result.get("note"):
        summary += f"; {result['note']}"
    print(summary, file=sys.stderr)
    return 0 if n else 1


@contextlib.contextmanager
def _citations(args: argparse.Namespace):
    """A CitationService on the store, confined to the roots (no --root: those the server's documents plan covers,
    else the home directory), for one command-line call; it reads and writes beside a running server."""
    from flows.citations.service import CitationService
    from flows.documents.service import plan_roots
    from flows.documents.settings import DocumentSettings
    from flows.roots import Roots
    from mcp_server.config import prepare_environment
    from store.engine import make_engine

    settings = _settings(args)
    prepare_environment(settings)  # the data dir's cache, where outputs go
    try:
        documents = DocumentSettings.from_env()
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    engine = make_engine(settings.db_url)
    try:
        roots = settings.roots or plan_roots(engine) or settings.effective_roots
        yield CitationService(engine, Roots.of(roots), settings.data_dir, allow_symlinks=documents.allow_symlinks)
    finally:
        engine.dispose()


def copy_output(source: str, target: str) -> str:
    """Copy a resolved output to ``target`` through a temporary file beside it, renamed into place (never a
    half-written FILE); the temporary file is removed on any failure. Returns the absolute target."""
    import shutil
    import tempfile

    target = os.path.abspath(os.path.expanduser(target))
    if os.path.isdir(target):
        raise InvalidInput(f"-o {target} is a directory; give a file name", field="--output")
    folder = os.path.dirname(target)
    try:
        fd, temp = tempfile.mkstemp(prefix=".assay-cite-", dir=folder)
    except OSError as exc:
        raise InvalidInput(f"cannot write into {folder}: {exc.strerror or exc}", field="--output") from None
    try:
        with os.fdopen(fd, "wb") as out, open(source, "rb") as src:
            shutil.copyfileobj(src, out, 1 << 20)
        os.replace(temp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return target


def format_resolution(result: dict[str, Any], copied: str | None = None) -> list[str]:
    """What `assay cite` prints: the canonical address, the source and its hash, the output file."""
    lines = [f"address  {result['address']}", f"source   {result['source_path']}", f"hash     {result['source_hash']}"]
    if result.get("output_path"):
        size = result.get("size_bytes")
        lines.append(f"output   {copied or result['output_path']}" + (f"  ({result.get('mime_type')}, {size:,} "
                                                                        "bytes)" if size is not None else ""))
    return lines


def cmd_cite(args: argparse.Namespace) -> int:
    """`assay cite`: resolve an address as the resolve tool does; -o copies the output to a file."""
    import json

    if args.output and args.virtual:
        raise InvalidInput("-o needs an extracted file; leave out --virtual", field="--output")
    with _citations(args) as service:
        result = service.resolve(address=args.address, virtual=args.virtual, exact=args.exact,
                                 allow_stale=args.allow_stale)
    copied = copy_output(result["output_path"], args.output) if args.output and result.get("output_path") else None
    if args.json:
        print(json.dumps({**result, **({"copied_to": copied} if copied else {})}, indent=2))
    else:
        for line in format_resolution(result, copied):
            print(line)
    if result.get("stale"):
        print("assay: the map this citation came from was made before the file changed (--allow-stale)",
              file=sys.stderr)
    return 0


def format_map(resource_map: dict[str, Any]) -> list[str]:
    """A map as a tree: the resource, then one line per node (indented by depth): id, title, place, address."""
    meta = resource_map.get("metadata", {})
    lines = [f"{resource_map['resource_id']}  {resource_map['type']}  {resource_map['title']!r}  "
             f"({meta.get('origin', '?')}, {resource_map['source_path']})"]

    def place(location: dict[str, Any]) -> str:
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

    def walk(nodes: list[dict[str, Any]], depth: int) -> None:
        for node in nodes:
            location = node.get("location", {})
            address = location.get("virtual_address") or ""
            lines.append(f"{'  ' * (depth + 1)}{node['id']}  {node.get('title') or ''}  {place(location)}  {address}"
                         .rstrip())
            walk(node.get("children") or [], depth + 1)

    walk(resource_map.get("nodes", []), 0)
    return lines


def cmd_map(args: argparse.Namespace) -> int:
    """`assay map`: build a file's map locally (stored for resolve) and print it."""
    import json

    from mcp_server.tools.citations import map_view

    path = args.path
    if not os.path.isabs(os.path.expanduser(path)) and os.path.exists(path):
        path = os.path.abspath(path)
    if args.window is not None and args.window <= 0:
        raise InvalidInput("--window takes a positive size", field="--window")
    with _citations(args) as service:
        view = map_view(service.build_map(os.path.expanduser(path), strategy=args.strategy, window=args.window))
    if args.json:
        print(json.dumps(view, indent=2))
    else:
        for line in format_map(view):
            print(line)
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import anyio

    from mcp_server.app import AssayApp, build_server
    from mcp_server.http import serve_http

    groups = [g.strip() for g in args.tool_groups.split(",")] if args.tool_groups else None
    hosts = [h.strip() for h in args.allowed_hosts.split(",") if h.strip()] if args.allowed_hosts else None
    settings = _settings(args, transport=args.transport, host=args.host, port=args.port, tool_groups=groups,
                         allowed_hosts=hosts, use_prefect=False if args.no_prefect else None,
                         plans_dir=args.plans_dir)
    if settings.transport == "http":
        from mcp_server.http import transport_security

        transport_security(settings)  # refuses an open non-loopback binding before anything starts
    app = AssayApp.create(settings)
    mcp = build_server(app)

    def stop(signum, _frame):  # SIGTERM ends the server as Ctrl-C does: watchers stopped, Prefect's server too
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    if settings.use_prefect:
        from flows import prefect_support

        prefect_support.configure(settings.data_dir, publish=True)  # `assay index` here reuses our Prefect API
    app.start_background()
    app.sources.start_enabled()
    for path in args.index:
        from flows.index.service import index_path

        result = index_path(app.runner, root=app.roots.resolve(os.path.abspath(path), field="--index"),
                            async_=True, max_age=0)
        logging.getLogger("assay").info("indexing %s in the background (job %s)", path, result.get("jobId"))
    logging.getLogger("assay").info(
        "assay serving over %s%s; store %s; roots %s", settings.transport,
        f" at http://{settings.host}:{settings.port}/mcp" if settings.transport == "http" else "",
        settings.db_url, app.roots.describe(),
    )
    try:
        if settings.transport == "http":
            anyio.run(serve_http, mcp, settings)
        else:
            mcp.run("stdio")
    except KeyboardInterrupt:
        pass
    finally:
        app.close()
    return 0


def cmd_plan(args: argparse.Namespace) -> int:
    from mcp_server import plan_cli
    from mcp_server.app import AssayApp

    def make_app(use_prefect: bool = True):
        return AssayApp.create(_settings(args, use_prefect=use_prefect), reap=False)  # a server may be running

    return plan_cli.run(args, make_app)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    _setup_logging(args.log_level)
    try:
        code = {"serve": cmd_serve, "index": cmd_index, "classify": cmd_classify, "search": cmd_search,
                "ask": cmd_ask, "cite": cmd_cite, "map": cmd_map, "plan": cmd_plan}[args.command](args)
    except AssayError as exc:
        print(f"assay: {exc}", file=sys.stderr)
        code = 2
    if argv is None and args.command != "serve":  # the program itself (not a caller of main): end it now
        _exit_now(code)
    return code


def _exit_now(code: int) -> NoReturn:
    """End a command-line call without the interpreter's teardown of its thousands of modules (0.5-1 s once Prefect
    is loaded). What that teardown would run first still runs, in its order: threading's exit hooks (Prefect drains
    its event and log queues to the API there) and the join of non-daemon threads, then the atexit handlers (our
    Prefect API child stopped, logs flushed)."""
    sys.stdout.flush()
    sys.stderr.flush()
    threading._shutdown()  # what Python's own exit calls first (private, stable since 3.4)
    atexit._run_exitfuncs()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
