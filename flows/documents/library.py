"""The document library of reference 001 as plain functions (the MCP tools in mcp_server/tools/documents.py are thin
wrappers): browse folders (``list_collections``), find documents by name (``find_document``), read their text
(``read_document``), describe them (``get_document_info``) and search them (``search_documents``,
``search_multiple``).

This module is the tools' one door; each part lives in its own module: ``flows.documents.listing`` (browsing and
finding by name), ``flows.documents.reading`` (locating a document and reading its text), ``flows.documents.info``
(describing it), ``flows.documents.scoped_search`` (the search tools' scope and answers) and
``flows.documents.citing`` (the citations beside the matches).
"""

from __future__ import annotations

from flows.documents.citing import cited_matches
from flows.documents.info import get_document_info, nest_toc, public_metadata
from flows.documents.listing import find_document, iso, list_collections, name_score, size_human
from flows.documents.reading import SUPPORTED, Located, Text, document_text, locate, read_document
from flows.documents.scoped_search import SearchScope, resolve_scope, search_documents, search_multiple

__all__ = ["SUPPORTED", "Located", "SearchScope", "Text", "cited_matches", "document_text", "find_document",
           "get_document_info", "iso", "list_collections", "locate", "name_score", "nest_toc", "public_metadata",
           "read_document", "resolve_scope", "search_documents", "search_multiple", "size_human"]
