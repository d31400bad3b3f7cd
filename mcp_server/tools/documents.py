"""Document tools (reference 001): list_collections, find_document, search_documents, search_multiple,
read_document, get_document_info. Thin typed wrappers over flows.documents.library (browsing, names, reading) and
flows.documents.search (the boolean full-text search); the work runs in worker threads, off the event loop.

Paths are reference 001's: relative to the root holding them (the root's name first when the server has several),
absolute paths inside the roots accepted too. Errors carry reference 001's codes (DOCUMENT_NOT_FOUND, ...) as the
start of the tool error's text, with ``details`` ({"path": ...}) in the error object.

``search_documents`` is two searches under one name: reference 001's boolean search (``scope`` given) and reference
002's semantic search (the query alone, or with ``options`` {limit, minScore, includeMetadata}) over the semantic
index (flows.semantic.search.semantic_search); every answer says which ran (``search_type``) and the output schema
holds both shapes' fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Literal

import anyio
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from flows.documents import library
from flows.documents import settings as doc_settings
from flows.documents.executor import options_for
from flows.documents.paths import DocumentPaths
from flows.semantic import library as semantic_library
from flows.semantic.search import semantic_search as run_semantic_search
from mcp_server.tools.common import READ_ONLY, ToolSet, tool
from store.errors import DocumentError, InvalidInput

if TYPE_CHECKING:
    from mcp_server.app import AssayApp


# --- parameters -----------------------------------------------------------------------------------------------------


class Scope(BaseModel):
    """Where a boolean search looks: everything, one collection (folder), or one document."""

    model_config = ConfigDict(extra="forbid")
    type: Literal["global", "collection", "document"] = Field(
        description="global: every document; collection: the documents under a folder; document: one document")
    path: str | None = Field(default=None, description="Path for collection/document scope (relative to the "
                                                        "root, as list_collections and find_document show it)")


class SemanticOptions(BaseModel):
    """Reference 002's options of the semantic search (search_documents without scope)."""

    model_config = ConfigDict(extra="forbid")
    limit: int = Field(default=10, ge=1, le=100, description="Maximum chunks to return")
    minScore: float | None = Field(default=None, ge=0.0, le=1.0, description=(
        "Lowest cosine similarity returned (0 for every chunk). Omitted: a cut-off fitted to the model, above what "
        "unrelated text scores and at least half the best chunk's margin over that, so a question with good "
        "answers never comes back empty (the answer's minScore says which applied)"))
    includeMetadata: bool = Field(default=True, description="Include each chunk's file metadata")


# a hit's address, as the citation tools' resolve takes it (flows.semantic.model.citation)
CITATION = ("where it is, as an address resolve accepts: doc://RESOURCE#pages=N-M (paged documents), "
            "text://RESOURCE#lines=A-B (others), image://RESOURCE (an image read with OCR); RESOURCE is the file's "
            "resource id (listResources)")


def _none(value: Any) -> bool:
    return value is None


def _false(value: Any) -> bool:
    return not value


def _one_page(value: Any) -> Any:
    """``"pages": 3`` (one page, not in a list, as models often send it) is read as ``[3]``."""
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


ContextLines = Annotated[int, Field(ge=0, le=50, description="Lines of context before and after each match (0-50)")]
SortOrder = Annotated[Literal["relevance", "path"], Field(
    description="Boolean search: the order of the matches shown: relevance (the documents that answer best first, "
                "BM25; each one's lines in order) or path (documents in path order)")]


# --- results --------------------------------------------------------------------------------------------------------


class Collection(BaseModel):
    name: str
    path: str
    document_count: int = Field(description="documents directly in this collection")
    subcollection_count: int = Field(description="collections directly in this collection")


class DocumentListing(BaseModel):
    name: str
    path: str
    size_bytes: int
    modified: str = Field(description="last modification, ISO 8601 (UTC)")


class Collections(BaseModel):
    current_path: str
    collections: list[Collection]
    documents: list[DocumentListing]


class FoundDocument(DocumentListing):
    collection: str
    score: float = Field(description="1.0 exact name; prefix matches above contains matches")


class FoundDocuments(BaseModel):
    matches: list[FoundDocument]
    total_found: int


class Match(BaseModel):
    document: str
    line: int = Field(description="1-based line in the document's text (pages' lines in order)")
    text: str
    context_before: list[str]
    context_after: list[str]
    page: int | None = Field(default=None, exclude_if=_none, description="the page the line is on (paged formats)")
    ocr: bool = Field(default=False, exclude_if=_false, description="true when the line was read with OCR")
    citation: str | None = Field(default=None, exclude_if=_none, description=CITATION)


class SemanticChunkMetadata(BaseModel):
    """Reference 002's chunk metadata, with where the chunk is."""

    model_config = ConfigDict(extra="allow")
    fileSize: int | None
    lastModified: str | None = Field(description="ISO 8601 (UTC)")
    chunkOffset: int = Field(description="character offset of the chunk in the document's text")
    page: int | None = Field(default=None, description="page of the chunk's first character (paged formats)")
    pageEnd: int | None = None
    lineStart: int | None = Field(default=None, description="1-based line of the chunk's first character")
    lineEnd: int | None = None
    citation: str | None = Field(default=None, description=CITATION)


class SemanticChunk(BaseModel):
    """Reference 002's DocumentChunk (without its embedding)."""

    model_config = ConfigDict(extra="allow")
    id: str = Field(description="the chunk's id")
    filePath: str = Field(description="as the document tools show it (relative to its root)")
    absolutePath: str
    chunkIndex: int = Field(description="0-based; get_file_details(filePath, chunkIndex) shows it with context")
    content: str
    score: float = Field(description="cosine similarity to the query (0-1)")
    metadata: SemanticChunkMetadata | None = Field(default=None, exclude_if=_none,
                                                   description="with includeMetadata (the default)")


class SearchResult(BaseModel):
    """A search's answer, in one of two shapes that ``search_type`` names. boolean (scope given): matches,
    total_matches, truncated, pending_documents, failed_documents. semantic (no scope): results (reference 002's
    chunks), total_results, collection."""

    model_config = ConfigDict(extra="allow")
    query: str
    search_type: Literal["boolean", "semantic"] = Field(description="which search ran")
    # boolean
    matches: list[Match] | None = Field(default=None, exclude_if=_none, description="boolean: the matching lines")
    total_matches: int | None = Field(default=None, exclude_if=_none)
    truncated: bool | None = Field(default=None, exclude_if=_none)
    pending_documents: int | None = Field(default=None, exclude_if=_none,
                                          description="boolean: documents in scope not indexed yet: results may "
                                                      "grow")
    failed_documents: int | None = Field(default=None, exclude_if=_none,
                                         description="boolean: documents in scope that could not be read")
    # semantic
    results: list[SemanticChunk] | None = Field(default=None, exclude_if=_none,
                                                description="semantic: the most similar chunks, best first")
    total_results: int | None = Field(default=None, exclude_if=_none)
    collection: str | None = Field(default=None, exclude_if=_none, description="semantic: the collection searched")
    minScore: float | None = Field(default=None, exclude_if=_none,
                                   description="semantic: the cosine cut-off applied (given, or fitted to the model)")
    minScoreFitted: bool | None = Field(default=None, exclude_if=_none,
                                        description="semantic: whether minScore was fitted (no minScore given)")
    note: str | None = Field(default=None, exclude_if=_none, description="why the results may be incomplete")
    elapsed_ms: float | None = None


class QueryError(BaseModel):
    code: str
    message: str


class QueryResult(BaseModel):
    query: str
    matches: list[Match]
    total_matches: int
    truncated: bool
    pending_documents: int = 0
    failed_documents: int = 0
    error: QueryError | None = Field(default=None, exclude_if=_none,
                                     description="why this query failed (the others still ran)")


class MultipleResults(BaseModel):
    results: dict[str, QueryResult] = Field(description="keyed by the query as given")
    search_duration_ms: int
    queries_completed: int
    queries_failed: int
    pending_documents: int = 0
    note: str | None = Field(default=None, exclude_if=_none)


class DocumentContent(BaseModel):
    model_config = ConfigDict(extra="allow")
    path: str
    content: str
    pages_read: list[int]
    total_pages: int
    format: str
    truncated: bool
    char_count: int
    ocr_pages: list[int] = Field(default_factory=list, description="pages read whose text came from OCR")
    no_text_pages: list[int] = Field(default_factory=list,
                                     description="pages read that have no text layer and that OCR could not read")
    encoding: str | None = Field(default=None, exclude_if=_none)
    note: str | None = Field(default=None, exclude_if=_none)


class TocEntry(BaseModel):
    title: str
    level: int = Field(description="1 for the top level")
    page: int | None = Field(default=None, exclude_if=_none, description="PDF and other paged formats")
    line: int | None = Field(default=None, exclude_if=_none, description="Markdown: the heading's line")
    children: list["TocEntry"] | None = Field(default=None, exclude_if=_none)


class DocumentMetadata(BaseModel):
    model_config = ConfigDict(extra="allow")  # subject, creator, producer, modified, language when known
    title: str | None
    author: str | None
    created: str | None
    keywords: list[str]


class DocumentInfo(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str
    path: str
    collection: str
    format: str
    size_bytes: int
    size_human: str
    pages: int | None
    modified: str
    has_toc: bool
    toc: list[TocEntry]
    metadata: DocumentMetadata
    indexed: Literal["indexed", "pending", "failed", "not_indexed"] = Field(
        description="indexed: searchable; pending: changed or new, the documents plan will index it; failed: could "
                    "not be read (error says why); not_indexed: its folder is not in the file index")
    ocr_pages: int = 0
    no_text_pages: int = 0


# --- the searches -------------------------------------------------------------------------------------------------


def _paths(app) -> DocumentPaths:
    return DocumentPaths(app.roots, doc_settings.current().allow_symlinks)


def boolean_search(app, query: str, scope: Scope, *, context_lines: int, max_results: int,
                   fuzzy: bool, sort: str = "relevance") -> dict[str, Any]:
    settings = doc_settings.current()
    paths = DocumentPaths(app.roots, settings.allow_symlinks)
    target = library.resolve_scope(app.engine, paths, scope.type, scope.path)
    return library.search_documents(app.engine, paths, query, target, context_lines=context_lines,
                                    max_results=max_results, fuzzy=fuzzy, timeout=settings.search_timeout, sort=sort)


def semantic_search(app, query: str, options: SemanticOptions | None) -> dict[str, Any]:
    """Reference 002's search_documents: the chunks of the default collection most similar to ``query``
    (flows.semantic.search.semantic_search), as reference 002's chunk objects. INVALID_QUERY for an empty query,
    INDEX_NOT_FOUND when nothing was indexed."""
    opts = options or SemanticOptions()
    result = run_semantic_search(app.engine, query, limit=opts.limit, min_score=opts.minScore,
                                 include_metadata=opts.includeMetadata)
    return semantic_library.semantic_documents_view(_paths(app), result)


def register(tools: ToolSet, app: AssayApp) -> None:
    @tool(tools, "list_collections", READ_ONLY)
    async def list_collections(
        path: Annotated[str, Field(description="Path relative to knowledge root. Empty for root.")] = "",
    ) -> Collections:
        """Browse document collections (folders) in the knowledge base: the subfolders of a folder (with how many
        documents and subfolders each holds) and its documents (name, path, size, modified). Read from the disk, so
        it is current before indexing. Paths are relative to the root; with several roots the first component names
        the root."""
        paths = _paths(app)
        return Collections(**await anyio.to_thread.run_sync(library.list_collections, paths, path))

    @tool(tools, "find_document", READ_ONLY)
    async def find_document(
        query: Annotated[str, Field(description="Document name or part of it")],
        limit: Annotated[int, Field(ge=1, le=100, description="Max results")] = 10,
    ) -> FoundDocuments:
        """Find documents by name across all collections: case-insensitive, anywhere in the file name, best first
        (exact name > prefix > contains), with a score."""
        paths = _paths(app)
        return FoundDocuments(**await anyio.to_thread.run_sync(
            lambda: library.find_document(app.engine, paths, query, limit)))

    @tool(tools, "search_documents", READ_ONLY)
    async def search_documents(
        query: Annotated[str, Field(description="With scope (boolean search): terms with operators: space = AND, "
                                                "| = OR, -term = NOT, \"...\" = exact phrase, ( ) to group. Without "
                                                "scope (semantic search): a question or phrase in natural language")],
        scope: Annotated[Scope | None, Field(description="Boolean search: {\"type\": \"global\"}, or collection / "
                                                         "document with a path. Omit it for the semantic search")]
        = None,
        context_lines: Annotated[int, Field(ge=0, le=50, description="Boolean search: lines of context before "
                                                                     "and after each match (0-50)")] = 5,
        max_results: Annotated[int, Field(ge=1, le=500, description="Boolean search: max results (1-500)")] = 20,
        fuzzy: Annotated[bool, Field(description="Boolean search: tolerate small typos in the terms (slower)")]
        = False,
        sort: SortOrder = "relevance",
        options: Annotated[SemanticOptions | None, Field(
            description="Semantic search (reference 002; no scope): {limit=10, minScore (default: fitted to the "
                        "model), includeMetadata=true}")] = None,
    ) -> SearchResult:
        """Search inside documents, two ways under one name (search_type in the answer says which ran).

        With scope: the boolean full-text search (reference 001): each match is a line (with its line number, page,
        context lines and a citation resolve accepts). `attack armor` (both), `move|teleport` (either),
        `attack -ranged` (not), `"end of turn"` (phrase), parentheses to group; case-insensitive. total_matches
        counts every matching line; the matches shown come from the documents that answer best (BM25: more and
        rarer matches first; sort "path" for path order). Reports how many documents in scope are not indexed yet
        (pending_documents), so a search during indexing says it may be incomplete.

        Without scope (the query alone, or with options): the semantic search (reference 002) over the "default"
        collection that index_files builds: the chunks most similar in meaning to the query, each with its file,
        chunkIndex (get_file_details shows it with context), pages, lines and a citation. Their cosine similarity
        is at least minScore when given; omitted, the cut-off is fitted to the model (above what unrelated text
        scores, and at least half the best chunk's margin over that): a question the documents answer gets its
        best chunks, one they do not gets none. INDEX_NOT_FOUND before anything was indexed. The search tool adds
        hybrid ranking and filters."""
        if scope is not None:
            if options is not None:
                raise InvalidInput("options belongs to the semantic search (no scope); the boolean search takes "
                                   "context_lines, max_results, fuzzy and sort", field="options")
            result = await anyio.to_thread.run_sync(
                lambda: boolean_search(app, query, scope, context_lines=context_lines, max_results=max_results,
                                       fuzzy=fuzzy, sort=sort))
            result = {"search_type": "boolean", **result}
        else:
            # the boolean search's own parameters, set to anything but their defaults, would be ignored: refused
            given = [name for name, value, default in (("context_lines", context_lines, 5),
                                                       ("max_results", max_results, 20), ("fuzzy", fuzzy, False),
                                                       ("sort", sort, "relevance"))
                     if value != default]
            if given:
                raise InvalidInput(f"{', '.join(given)} belong{'s' * (len(given) == 1)} to the boolean search, which "
                                   "needs scope (e.g. {\"type\": \"global\"}); without scope the semantic search "
                                   "runs, and takes options {limit, minScore, includeMetadata}", field=given[0])
            try:
                result = await anyio.to_thread.run_sync(lambda: semantic_search(app, query, options))
            except DocumentError as exc:
                if exc.code != "INDEX_NOT_FOUND":
                    raise
                raise type(exc)(exc.code, exc.message + "; the semantic search (search_documents without "
                                    "scope) needs index_files first, the boolean full-text search needs none: "
                                    "give scope, e.g. {\"type\": \"global\"}", field=exc.field or "query",
                                    details=exc.details) from None
        return SearchResult(**result)

    @tool(tools, "search_multiple", READ_ONLY)
    async def search_multiple(
        queries: Annotated[list[str], Field(min_length=1, max_length=10, description="List of search queries")],
        scope: Annotated[Scope, Field(description="Search scope, as search_documents takes it")],
        context_lines: ContextLines = 5,
        max_results_per_query: Annotated[int, Field(ge=1, le=500, description="Max results per query")] = 20,
        sort: SortOrder = "relevance",
    ) -> MultipleResults:
        """Search for several queries in parallel (each as search_documents does, on every core), results keyed by
        the query; a query that fails (an invalid query, a timeout) carries its error and does not stop the
        others."""
        settings = doc_settings.current()
        paths = DocumentPaths(app.roots, settings.allow_symlinks)

        def run() -> dict[str, Any]:
            target = library.resolve_scope(app.engine, paths, scope.type, scope.path)
            return library.search_multiple(app.engine, paths, queries, target, context_lines=context_lines,
                                           max_results_per_query=max_results_per_query,
                                           timeout=settings.search_timeout, sort=sort)

        return MultipleResults(**await anyio.to_thread.run_sync(run))

    @tool(tools, "read_document", READ_ONLY)
    async def read_document(
        path: Annotated[str, Field(description="Path to document")],
        pages: Annotated[list[Annotated[int, Field(ge=1)]], BeforeValidator(_one_page), Field(
            description="Specific pages to read (1-indexed). Empty = all. Ignored for formats without pages")] = [],  # noqa: B006 (never mutated)
    ) -> DocumentContent:
        """Read a document's text, whole or some pages (PDF, EPUB, ...: 1-based, with "--- Page N ---"
        separators). Long documents are cut at max_document_read_chars (truncated: true; read further by pages).
        Says which pages were read with OCR and which have no text."""
        settings = doc_settings.current()
        paths = DocumentPaths(app.roots, settings.allow_symlinks)
        result = await anyio.to_thread.run_sync(
            lambda: library.read_document(app.engine, paths, path, list(pages), max_chars=settings.max_read_chars,
                                          options=options_for(None)))
        return DocumentContent(**result)

    @tool(tools, "get_document_info", READ_ONLY)
    async def get_document_info(
        path: Annotated[str, Field(description="Path to document")],
    ) -> DocumentInfo:
        """Get document metadata including the table of contents: format, size, pages, modified, a nested toc (PDF
        outline with pages, Markdown headings with lines), title / author / created / keywords, and whether the
        document is in the full-text index yet (or why it could not be read)."""
        paths = _paths(app)
        result = await anyio.to_thread.run_sync(
            lambda: library.get_document_info(app.engine, paths, path, options=options_for(None)))
        return DocumentInfo(**result)
