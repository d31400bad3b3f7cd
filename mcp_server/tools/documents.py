"""Document tools (reference 001): list_collections, find_document, search_documents, search_multiple,
read_document, get_document_info. Thin typed wrappers over flows.documents.library (browsing, names, reading) and
flows.documents.search (the boolean full-text search); the work runs in worker threads, off the event loop.

Paths are reference 001's: relative to the root holding them (the root's name first when the server has several),
absolute paths inside the roots accepted too. Errors carry reference 001's codes (DOCUMENT_NOT_FOUND, ...) as the
start of the tool error's text, with ``details`` ({"path": ...}) in the error object.

``search_documents`` is two searches under one name: reference 001's boolean search (``scope`` given) and reference
002's semantic search (``options`` {limit, minScore, includeMetadata}, no ``scope``), which arrives with the semantic
index; its schema takes both shapes now, so adding the second changes no client's call.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import anyio
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from flows.documents import library
from flows.documents import settings as doc_settings
from flows.documents.paths import DocumentPaths
from mcp_server.tools.common import READ_ONLY, tool
from store.errors import InvalidInput


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
    minScore: float = Field(default=0.7, ge=0.0, le=1.0, description="Lowest cosine similarity returned")
    includeMetadata: bool = Field(default=True, description="Include each chunk's file metadata")


def _none(value: Any) -> bool:
    return value is None


def _false(value: Any) -> bool:
    return not value


def _one_page(value: Any) -> Any:
    """``"pages": 3`` (one page, not in a list, as models often send it) is read as ``[3]``."""
    return [value] if isinstance(value, int) and not isinstance(value, bool) else value


ContextLines = Annotated[int, Field(ge=0, le=50, description="Lines of context before and after each match (0-50)")]


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


class SearchResult(BaseModel):
    """A search's answer. The boolean search (scope given) fills these fields; the semantic search of reference 002
    will answer under the same tool with its own fields (hence extra fields are allowed)."""

    model_config = ConfigDict(extra="allow")
    query: str
    search_type: Literal["boolean", "semantic"] = "boolean"
    matches: list[Match]
    total_matches: int
    truncated: bool
    pending_documents: int = Field(0, description="documents in scope not indexed yet: results may grow")
    failed_documents: int = Field(0, description="documents in scope that could not be read")
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
                   fuzzy: bool) -> dict[str, Any]:
    settings = doc_settings.current()
    paths = DocumentPaths(app.roots, settings.allow_symlinks)
    target = library.resolve_scope(app.engine, paths, scope.type, scope.path)
    return library.search_documents(app.engine, paths, query, target, context_lines=context_lines,
                                    max_results=max_results, fuzzy=fuzzy, timeout=settings.search_timeout)


def semantic_search(app, query: str, options: SemanticOptions | None) -> dict[str, Any]:
    """Reference 002's search_documents: not in this version (it comes with the semantic index)."""
    raise InvalidInput("search_documents needs scope for the boolean search, e.g. {\"type\": \"global\"} or "
                       "{\"type\": \"collection\", \"path\": \"docs\"}; the semantic search (query with options "
                       "{limit, minScore, includeMetadata} and no scope) arrives with the semantic index",
                       field="scope")


def register(mcp: MCPServer, app) -> None:
    @tool(mcp, "list_collections", READ_ONLY)
    async def list_collections(
        path: Annotated[str, Field(description="Path relative to knowledge root. Empty for root.")] = "",
    ) -> Collections:
        """Browse document collections (folders) in the knowledge base: the subfolders of a folder (with how many
        documents and subfolders each holds) and its documents (name, path, size, modified). Read from the disk, so
        it is current before indexing. Paths are relative to the root; with several roots the first component names
        the root."""
        paths = _paths(app)
        return Collections(**await anyio.to_thread.run_sync(library.list_collections, paths, path))

    @tool(mcp, "find_document", READ_ONLY)
    async def find_document(
        query: Annotated[str, Field(description="Document name or part of it")],
        limit: Annotated[int, Field(ge=1, le=100, description="Max results")] = 10,
    ) -> FoundDocuments:
        """Find documents by name across all collections: case-insensitive, anywhere in the file name, best first
        (exact name > prefix > contains), with a score."""
        paths = _paths(app)
        return FoundDocuments(**await anyio.to_thread.run_sync(
            lambda: library.find_document(app.engine, paths, query, limit)))

    @tool(mcp, "search_documents", READ_ONLY)
    async def search_documents(
        query: Annotated[str, Field(description="Search query with boolean operators: space = AND, | = OR, "
                                                "-term = NOT, \"...\" = exact phrase, ( ) to group")],
        scope: Annotated[Scope | None, Field(description="Search scope: {\"type\": \"global\"}, or collection / "
                                                         "document with a path. Required for the boolean search")]
        = None,
        context_lines: ContextLines = 5,
        max_results: Annotated[int, Field(ge=1, le=500, description="Max results (1-500)")] = 20,
        fuzzy: Annotated[bool, Field(description="Tolerate small typos in the terms (slower)")] = False,
        options: Annotated[SemanticOptions | None, Field(
            description="Semantic search options (reference 002; with no scope): arrives with the semantic "
                        "index")] = None,
    ) -> SearchResult:
        """Search for text inside documents using boolean patterns: each match is a line (with its line number,
        page and context lines). `attack armor` (both), `move|teleport` (either), `attack -ranged` (not),
        `"end of turn"` (phrase), parentheses to group; case-insensitive. Reports how many documents in scope are
        not indexed yet (pending_documents), so a search during indexing says it may be incomplete."""
        if scope is not None:
            if options is not None:
                raise InvalidInput("options belongs to the semantic search (no scope); the boolean search takes "
                                   "context_lines, max_results and fuzzy", field="options")
            result = await anyio.to_thread.run_sync(
                lambda: boolean_search(app, query, scope, context_lines=context_lines, max_results=max_results,
                                       fuzzy=fuzzy))
        else:
            result = await anyio.to_thread.run_sync(lambda: semantic_search(app, query, options))
        return SearchResult(**result)

    @tool(mcp, "search_multiple", READ_ONLY)
    async def search_multiple(
        queries: Annotated[list[str], Field(min_length=1, max_length=10, description="List of search queries")],
        scope: Annotated[Scope, Field(description="Search scope, as search_documents takes it")],
        context_lines: ContextLines = 5,
        max_results_per_query: Annotated[int, Field(ge=1, le=500, description="Max results per query")] = 20,
    ) -> MultipleResults:
        """Search for several queries in parallel (each as search_documents does), results keyed by the query; a
        query that fails (an invalid query, a timeout) carries its error and does not stop the others."""
        settings = doc_settings.current()
        paths = DocumentPaths(app.roots, settings.allow_symlinks)

        def run() -> dict[str, Any]:
            target = library.resolve_scope(app.engine, paths, scope.type, scope.path)
            return library.search_multiple(app.engine, paths, queries, target, context_lines=context_lines,
                                           max_results_per_query=max_results_per_query,
                                           timeout=settings.search_timeout)

        return MultipleResults(**await anyio.to_thread.run_sync(run))

    @tool(mcp, "read_document", READ_ONLY)
    async def read_document(
        path: Annotated[str, Field(description="Path to document")],
        pages: Annotated[list[Annotated[int, Field(ge=1)]], BeforeValidator(_one_page), Field(
            description="Specific pages to read (1-indexed). Empty = all. Ignored for formats without pages")] = [],
    ) -> DocumentContent:
        """Read a document's text, whole or some pages (PDF, EPUB, ...: 1-based, with "--- Page N ---"
        separators). Long documents are cut at max_document_read_chars (truncated: true; read further by pages).
        Says which pages were read with OCR and which have no text."""
        settings = doc_settings.current()
        paths = DocumentPaths(app.roots, settings.allow_symlinks)
        from flows.documents.executor import options_for

        result = await anyio.to_thread.run_sync(
            lambda: library.read_document(app.engine, paths, path, list(pages), max_chars=settings.max_read_chars,
                                          options=options_for(None)))
        return DocumentContent(**result)

    @tool(mcp, "get_document_info", READ_ONLY)
    async def get_document_info(
        path: Annotated[str, Field(description="Path to document")],
    ) -> DocumentInfo:
        """Get document metadata including the table of contents: format, size, pages, modified, a nested toc (PDF
        outline with pages, Markdown headings with lines), title / author / created / keywords, and whether the
        document is in the full-text index yet (or why it could not be read)."""
        paths = _paths(app)
        from flows.documents.executor import options_for

        result = await anyio.to_thread.run_sync(
            lambda: library.get_document_info(app.engine, paths, path, options=options_for(None)))
        return DocumentInfo(**result)
