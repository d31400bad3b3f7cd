"""Errors every layer raises and the MCP tools turn into tool errors.

Each carries a stable ``code`` (reference 001's named codes where one applies) and a message an agent can act on:
what was wrong, where, and what would be accepted.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# the one root (re-exported), defined at the bottom layer so plan errors are assay errors too
from dsl.errors import AssayError as AssayError


class Cancelled(AssayError):
    """Long work stopped on request (a cancel from a tool, the command line or Prefect); ``result`` is what it had
    done when it stopped, when the work reports that."""

    code = "CANCELLED"

    def __init__(self, message: str = "cancelled on request", *, result: Any = None) -> None:
        super().__init__(message)
        self.result = result


class InvalidInput(AssayError):
    """A parameter had a value we cannot use."""

    code = "INVALID_PARAMS"


class NotFound(AssayError):
    """A named thing (entry, set, query, job, ...) does not exist."""

    code = "NOT_FOUND"


class AlreadyExists(AssayError):
    code = "ALREADY_EXISTS"


class Conflict(AssayError):
    """The request contradicts the current state (a cycle in the set DAG, a target that exists, ...)."""

    code = "CONFLICT"


class PathNotAllowed(AssayError):
    """A path lies outside every configured root."""

    code = "PATH_TRAVERSAL_DETECTED"


class FileOperationError(AssayError):
    code = "FILE_OPERATION_FAILED"


class QueryTimeout(AssayError):
    """A statement on the store ran past the statement time limit and was stopped."""

    code = "QUERY_TIMEOUT"


class NoSpace(AssayError):
    """The disk holding the store, the cache or a destination is full (ENOSPC, SQLITE_FULL): nothing half-written
    was kept; the work resumes once space is freed."""

    code = "NO_SPACE"


class StoreVersionError(AssayError):
    """The store's schema revision is one this code cannot open: made by a newer assay (upgrade assay, or restore
    a backup made before), or not a revision of assay's migrations at all."""

    code = "STORE_VERSION"


class CodedError(AssayError):
    """An error whose code is one of the class's ``CODES`` (the named codes of a reference), with ``details``."""

    CODES: tuple[str, ...] = ()
    KIND = "coded"

    def __init__(self, code: str, message: str, *, field: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        if code not in self.CODES:
            raise ValueError(f"{code!r} is not a {self.KIND} error code; known: {', '.join(self.CODES)}")
        super().__init__(message, field=field)
        self.code = code
        self.details = details or {}


class DocumentError(CodedError):
    """A refusal of the document tools under one of reference 001's codes, with the reference's ``details``
    (``{"path": ...}``): DOCUMENT_NOT_FOUND, COLLECTION_NOT_FOUND, NOT_A_DIRECTORY, PATH_TRAVERSAL_DETECTED,
    SYMLINK_NOT_ALLOWED, SEARCH_TIMEOUT, INVALID_QUERY, SCOPE_NOT_FOUND, UNSUPPORTED_FORMAT, PAGE_OUT_OF_RANGE,
    FILTER_FAILED, METADATA_EXTRACTION_FAILED; and the semantic index's (reference 002): INVALID_PATH,
    INDEX_NOT_FOUND, GPU_NOT_AVAILABLE, with MODEL_MISMATCH (a collection never mixes models)."""

    CODES = ("DOCUMENT_NOT_FOUND", "COLLECTION_NOT_FOUND", "NOT_A_DIRECTORY", "PATH_TRAVERSAL_DETECTED",
             "SYMLINK_NOT_ALLOWED", "SEARCH_TIMEOUT", "INVALID_QUERY", "SCOPE_NOT_FOUND", "UNSUPPORTED_FORMAT",
             "PAGE_OUT_OF_RANGE", "FILTER_FAILED", "METADATA_EXTRACTION_FAILED",
             "INVALID_PATH", "INDEX_NOT_FOUND", "GPU_NOT_AVAILABLE", "MODEL_MISMATCH")

    KIND = "document"


def check_choice(value: Any, allowed: Iterable[str], *, field: str, what: str) -> str:
    """``value`` if it is one of ``allowed``, else InvalidInput naming the parameter and listing what is accepted."""
    choices = list(allowed)
    if not isinstance(value, str) or value not in choices:
        raise InvalidInput(f"{field} {value!r} is not a supported {what}; use one of: {', '.join(choices)}",
                           field=field)
    return value


class CitationError(CodedError):
    """A refusal of the citation tools (reference 003), under a code an agent can act on:

    - RESOURCE_NOT_FOUND: no resource of that id (the message names how to list them);
    - NODE_NOT_FOUND: the map has no node of that id (the message names a few that exist);
    - INVALID_ADDRESS: an address that does not parse or does not fit its source (pages past the end, t end before
      start, a bbox that is not four numbers within 0-1, a zero-length range);
    - INVALID_MAP: an agent-supplied map with problems, each named with its node (``details["problems"]``);
    - SOURCE_CHANGED: the file changed since its agent-supplied map was made (supply it again, or allow_stale);
    - UNSUPPORTED_FORMAT: the file cannot be mapped or extracted this way (a doc:// address of a Markdown file);
    - EXTRACTION_FAILED: the file is corrupt or truncated, or ffmpeg / PyMuPDF / Pillow refused it (the message says
      what they said);
    - INVALID_PATH: a path outside the roots, or not a file.
    """

    CODES = ("RESOURCE_NOT_FOUND", "NODE_NOT_FOUND", "INVALID_ADDRESS", "INVALID_MAP", "SOURCE_CHANGED",
             "UNSUPPORTED_FORMAT", "EXTRACTION_FAILED", "INVALID_PATH")

    KIND = "citation"
