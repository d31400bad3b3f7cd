"""Semantic index tools (reference 002 and our own): index_files, update_index, get_file_details, search, and
index-cancel. Thin typed wrappers over flows.semantic.service (indexing as plan executions), flows.semantic.search
(semantic / keyword / hybrid search with filters) and flows.semantic.library (what the tools show); the work runs in
worker threads, off the event loop. (search_documents' semantic call shape lives with the document tools.)

Paths are the document tools': relative to the root holding them (the root's name first with several roots),
absolute paths inside the roots accepted. Errors carry reference 002's codes (INVALID_PATH, UNSUPPORTED_FORMAT,
INDEX_NOT_FOUND, GPU_NOT_AVAILABLE) as the start of the tool error's text.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import Context
from pydantic import BaseModel, ConfigDict, Field, model_validator

from flows.documents import settings as doc_settings
from flows.documents.executor import options_for
from flows.documents.paths import DocumentPaths
from flows.semantic import library, service
from flows.semantic import search as semantic_search
from flows.semantic.model import DEFAULT_COLLECTION
from flows.core.roots import current_limit
from mcp_server.tools.common import READ_ONLY, WRITES, McpProgress, StrList, ToolSet, tool
from mcp_server.tools.plans import reachable
from store import plans as store_plans
from store.errors import AssayError, DocumentError

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


# a hit's address, as the citation tools' resolve takes it (flows.semantic.model.citation)
CITATION = ("where it is, as an address resolve accepts: doc://RESOURCE#pages=N-M (paged documents), "
            "text://RESOURCE#lines=A-B (others), image://RESOURCE (an image read with OCR); RESOURCE is the file's "
            "resource id (listResources)")


def _none(value: Any) -> bool:
    return value is None


# --- parameters -----------------------------------------------------------------------------------------------------


class IndexOptions(BaseModel):
    """Reference 002's index_files options."""

    model_config = ConfigDict(extra="forbid")
    chunkSize: int = Field(default=1000, ge=50, le=100_000, description="Characters per chunk (50-100000); chunks "
                                                                       "break at sentence or word boundaries")
    overlap: int = Field(default=200, ge=0, le=99_999, description="Characters shared by neighbouring chunks; "
                                                                  "less than chunkSize")
    maxFiles: int = Field(default=10000, ge=1, le=1_000_000, description="Most files to index in this call "
                                                                         "(1-1000000)")
    fileTypes: StrList | None = Field(default=None, description="Extensions to index, e.g. [\".md\", \".pdf\"] "
                                                                "(default: every document format)")

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        """An unknown key (``chunk_size``, ``maxfiles``) is refused naming the accepted ones, never ignored."""
        if isinstance(data, dict):
            unknown = [k for k in data if k not in cls.model_fields]
            if unknown:
                raise ValueError(f"unknown option(s) {', '.join(map(repr, unknown))}; accepted: "
                                 f"{', '.join(cls.model_fields)}")
        return data


CollectionName = Annotated[str, Field(min_length=1, max_length=200, description="The collection (a named index); "
                                                                                  "\"default\" unless given")]


# --- results --------------------------------------------------------------------------------------------------------


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class IndexStats(_Open):
    """What index_files / update_index answer: the statistics of the finished work (wait=true) or the execution
    that does it (wait=false); the service's own fields come along (files indexed, skipped, failed, chunks, ...)."""

    collection: str
    status: str = Field(description="success, partial (some files failed: errors says which), error, cancelled, or "
                                    "running (wait=false)")
    execution_id: int | None = Field(default=None, exclude_if=_none,
                                     description="the plan execution doing the work (index-cancel stops it)")


class CollectionInfo(_Open):
    name: str
    status: str = Field(description="ok: chunks searchable; empty: no text; error: could not be embedded")
    chunk_count: int
    current: bool | None = Field(default=None, exclude_if=_none,
                                 description="false when the file changed since it was embedded")
    error: str | None = Field(default=None, exclude_if=_none)


class ChunkDetail(BaseModel):
    index: int
    text: str
    start: int = Field(description="character offset of the chunk in the document's text")
    end: int
    page: int | None = Field(description="page of the chunk's first character (paged formats), else null")
    page_end: int | None
    line_start: int = Field(description="1-based line of the chunk's first character")
    line_end: int
    citation: str | None = Field(description=CITATION)
    context_before: list[str] = Field(description="the contextLines lines before the chunk")
    context_after: list[str] = Field(description="the contextLines lines after the chunk")


class FileDetails(BaseModel):
    path: str = Field(description="as the document tools show it (relative to its root)")
    absolute_path: str
    name: str
    size_bytes: int
    modified: str = Field(description="last modification, ISO 8601 (UTC)")
    format: str
    collections: list[CollectionInfo] = Field(description="the collections of the semantic index holding the file")
    collection: str | None = Field(description="the collection whose chunks are counted / shown")
    chunk_count: int
    content: str | None = Field(default=None, exclude_if=_none,
                                description="the whole text (without chunkIndex), cut like read_document's")
    truncated: bool | None = Field(default=None, exclude_if=_none)
    char_count: int | None = Field(default=None, exclude_if=_none)
    total_pages: int | None = Field(default=None, exclude_if=_none)
    chunk: ChunkDetail | None = Field(default=None, exclude_if=_none, description="with chunkIndex: that chunk")
    note: str | None = Field(default=None, exclude_if=_none)


class SearchHit(BaseModel):
    file: str = Field(description="as the document tools show it (relative to its root)")
    absolute_path: str
    collection: str
    chunk_index: int
    text: str = Field(description="the chunk's text")
    score: float = Field(description="ranking score: cosine similarity (semantic), full-text score (keyword), "
                                     "reciprocal-rank fusion (hybrid)")
    semantic_score: float | None = Field(description="cosine similarity to the query, when known")
    keyword_score: float | None = Field(description="full-text (BM25) score, when the keyword side found it")
    semantic_rank: int | None
    keyword_rank: int | None
    start: int
    end: int
    page: int | None
    page_end: int | None
    line_start: int
    line_end: int
    citation: str | None = Field(description=CITATION)


class SearchHits(_Open):
    query: str
    mode: str
    collection: str | None
    hits: list[SearchHit]
    total_hits: int
    elapsed_ms: float | None = None
    min_score: float | None = Field(default=None, description="the cosine cut-off applied (given, or fitted to the "
                                                               "model); null in keyword mode")
    min_score_fitted: bool = Field(default=False, description="whether min_score was fitted (none given)")
    note: str | None = Field(default=None, exclude_if=_none)


class CancelAnswer(BaseModel):
    execution_id: int
    cancelled: bool
    message: str


# --- helpers ------------------------------------------------------------------------------------------------------


def _paths(app) -> DocumentPaths:
    return DocumentPaths(app.roots, doc_settings.current().allow_symlinks)


def _folder(app, folder_path: str, field: str = "folderPath") -> str:
    """The absolute folder ``folder_path`` names (as the document tools read paths: relative to the root, the root's
    name first with several roots, or absolute inside them); any path that is no folder in the roots (missing,
    outside, through a symlink, a file) is reference 002's INVALID_PATH, saying which."""
    try:
        target = _paths(app).resolve(folder_path, field=field, not_found="COLLECTION_NOT_FOUND")
    except DocumentError as exc:
        raise DocumentError("INVALID_PATH", exc.message, field=field, details={"path": folder_path}) from None
    if not os.path.isdir(target):
        what = "is a file, not a folder" if os.path.exists(target) else "does not exist"
        raise DocumentError("INVALID_PATH", f"{field} {folder_path!r} {what}; give a folder inside the "
                                        f"roots ({', '.join(app.roots.paths)}); list_collections browses them",
                                        field=field, details={"path": folder_path})
    return target


def _stats(result: dict[str, Any], collection: str) -> IndexStats:
    data = dict(result)
    data.setdefault("collection", collection)
    data.setdefault("status", "success")
    return IndexStats(**data)


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "index_files", WRITES)
    async def index_files(
        folderPath: Annotated[str, Field(description="Folder to index: absolute inside the roots, or relative to "
                                                     "the root as list_collections shows it")],
        ctx: Context,
        options: Annotated[IndexOptions | None, Field(
            description="{chunkSize=1000, overlap=200, maxFiles=10000, fileTypes}")] = None,
        collection: CollectionName = DEFAULT_COLLECTION,
        wait: Annotated[bool, Field(description="true: return the statistics when done (with MCP progress); "
                                                "false: return at once with the execution id")] = True,
    ) -> IndexStats:
        """Index a folder for semantic search (reference 002): scan it recursively, extract the text of every
        supported document, chunk it (chunkSize characters at sentence or word boundaries, overlap shared), embed
        the chunks and store them in a collection (a persistent index beside the database). Incremental: files
        unchanged since the last run are not embedded again; deleted files leave the index. Runs as a plan
        execution: wait=true reports MCP progress and returns the statistics; wait=false returns the execution id
        at once (index-cancel stops it; plan-get shows it). Searches keep answering meanwhile."""
        opts = options or IndexOptions()
        folder = _folder(app, folderPath)
        if not wait:
            result = await anyio.to_thread.run_sync(lambda: service.index_files(
                app.plans, folder, chunk_size=opts.chunkSize, overlap=opts.overlap, max_files=opts.maxFiles,
                file_types=opts.fileTypes, collection=collection, wait=False))
            return _stats(result, collection)
        progress = McpProgress(ctx)

        def on_progress(p: Any) -> None:
            if isinstance(p, dict) and p.get("percent") is not None:
                progress.update(p["percent"], p.get("message") or p.get("stage"))

        result = await anyio.to_thread.run_sync(lambda: service.index_files(
            app.plans, folder, chunk_size=opts.chunkSize, overlap=opts.overlap, max_files=opts.maxFiles,
            file_types=opts.fileTypes, collection=collection, wait=True, on_progress=on_progress))
        await progress.finish(str(result.get("status", "completed")))
        return _stats(result, collection)

    @tool(tools, "update_index", WRITES)
    async def update_index(
        folderPath: Annotated[str, Field(description="The indexed folder the changes are in")],
        changes: Annotated[StrList, Field(min_length=1, max_length=10000, description="Changed, added or deleted "
                                                                                       "files: absolute, or "
                                                                                       "relative to folderPath")],
        collection: CollectionName = DEFAULT_COLLECTION,
    ) -> IndexStats:
        """Update a collection with the files that changed (reference 002): each listed file is embedded again if
        it changed, added if new, removed from the index if deleted; nothing else is touched. Answers what was
        updated / added / removed / unchanged / failed, errors (a listed path outside the folder is reported
        there, the rest is still done) and the collection's new size (documents_total, chunks_total).
        INDEX_NOT_FOUND when the collection was never built (index_files builds it)."""
        folder = _folder(app, folderPath)
        result = await anyio.to_thread.run_sync(
            lambda: service.update_index(app.plans, folder, list(changes), collection=collection))
        return _stats(result, collection)

    @tool(tools, "get_file_details", READ_ONLY)
    async def get_file_details(
        filePath: Annotated[str, Field(description="The file: absolute inside the roots, or as the search results "
                                                   "show it")],
        chunkIndex: Annotated[int | None, Field(ge=0, description="A chunk to show (0-based, as search results "
                                                                  "give it); omitted: the whole text")] = None,
        contextLines: Annotated[int, Field(ge=0, le=50, description="Lines of the document before and after the "
                                                                    "chunk (0-50)")] = 3,
        collection: Annotated[str | None, Field(description="Collection whose chunks to use (default: \"default\" "
                                                            "when the file is in it)")] = None,
    ) -> FileDetails:
        """Details of a file for context retrieval (reference 002): path, size, modified, format, the collections
        of the semantic index holding it and its chunk count, and either its whole text (cut like read_document:
        truncated) or, with chunkIndex, that chunk (text, offsets, pages, lines, citation) with contextLines lines
        before and after. A file in no collection still shows its text; asking for a chunk of it is
        INDEX_NOT_FOUND; a chunkIndex out of range names the valid range."""
        settings = doc_settings.current()
        paths = DocumentPaths(app.roots, settings.allow_symlinks)
        result = await anyio.to_thread.run_sync(lambda: library.get_file_details(
            app.engine, paths, filePath, chunk_index=chunkIndex, context_lines=contextLines, collection=collection,
            max_chars=settings.max_read_chars, options=options_for(None)))
        return FileDetails(**result)

    @tool(tools, "search", READ_ONLY)
    async def search(
        query: Annotated[str, Field(max_length=10000, description="What to find, in words (a question or a "
                                                                  "phrase)")],
        mode: Annotated[Literal["semantic", "keyword", "hybrid"], Field(
            description="hybrid (default): reciprocal-rank fusion of the full-text and the vector results; "
                        "semantic: meaning only; keyword: words only (BM25)")] = "hybrid",
        collection: Annotated[str | None, Field(description="Collection to search (default: \"default\")")] = None,
        sets: Annotated[StrList | None, Field(description="Only files in these resource sets (and their child "
                                                          "sets, as the resource-* tools see them)")] = None,
        condition: Annotated[str | dict[str, Any] | None, Field(
            description="Only files matching a plan condition, e.g. \"media_type = document and mtime > now - "
                        "30d\" (plan-validate explains the language)")] = None,
        path: Annotated[StrList | None, Field(description="Only files under these folders (or these files); "
                                                          "inside the roots")] = None,
        limit: Annotated[int, Field(ge=1, le=100, description="Most hits (1-100)")] = 10,
        min_score: Annotated[float | None, Field(ge=0.0, le=1.0, description=(
            "Lowest cosine similarity of a hit (0-1; semantic and hybrid). Omitted: a cut-off fitted to the model, "
            "above what unrelated text scores and at least half the best hit's margin over that (in hybrid mode "
            "hits holding the query's words are kept too)"))] = None,
    ) -> SearchHits:
        """Find the passages that answer a question: each hit is a chunk of a file with its text, its scores
        (semantic, keyword, fused) and where it is (pages, lines, a citation resolve accepts, such as
        doc://rules#pages=3 or text://notes#lines=10-20), filtered by resource sets, a plan condition and
        folders. Use this for the best answer to a question; search_documents with scope for exact boolean word
        matches line by line, and search_documents with options for reference 002's plain semantic search."""
        paths = _paths(app)

        def run() -> dict[str, Any]:
            scoped = [paths.resolve(p, field="path", not_found="SCOPE_NOT_FOUND") for p in path] if path else None
            if scoped is None and current_limit() is not None:  # a user limited to some roots finds only there
                scoped = list(app.roots.paths)
            filters = semantic_search.Filters(sets=list(sets) if sets else None, condition=condition, paths=scoped)
            result = semantic_search.search(app.engine, query, collection=collection, mode=mode, limit=limit,
                                            min_score=min_score, filters=filters, roots=app.roots)
            return library.search_view(app.engine, result, paths)

        return SearchHits(**await anyio.to_thread.run_sync(run))

    def yours(execution_id: int) -> bool:
        """Whether the caller may reach execution ``execution_id``: an id is a handle, and the execution of a plan
        over roots a limited user may not reach reads as no execution (mcp_server.tools.plans.reachable)."""
        if current_limit() is None:
            return True
        try:
            name = store_plans.get_execution(app.engine, execution_id=execution_id)["plan_name"]
            return reachable(app, app.plans.load(name))
        except AssayError:
            return False

    @tool(tools, "index-cancel", WRITES)
    def index_cancel(
        executionId: Annotated[int, Field(ge=1, description="The execution_id index_files (wait=false) returned")],
    ) -> CancelAnswer:
        """Stop a running index_files / update_index execution; what it embedded so far stays in the index (a
        later index_files goes on from there)."""
        cancelled = yours(executionId) and app.plans.cancel(executionId)
        message = ("cancellation requested; the execution stops after its current batch" if cancelled
                   else "no running execution has this id (finished already, or never started)")
        return CancelAnswer(execution_id=executionId, cancelled=cancelled, message=message)
