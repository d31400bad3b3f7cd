"""What every synthesis:// resource module shares: results as JSON, our errors as the JSON-RPC errors a client expects.

A read the caller got wrong is an invalid-params error (-32602) with our message: bad input (a limit that is not a
number, an unknown metric, a malformed job id), a path outside the roots, and a thing that does not exist (the SDK's
resource-not-found, also -32602). A full disk is the server's trouble, as for a tool (mcp_server.tools.common): an
internal error (-32603) with the NO_SPACE message and ``{"type": "NO_SPACE"}`` as data, whoever noticed it (NoSpace, an
OSError ENOSPC, MuPDF's or SQLite's words for it). Any other crash is an internal error whose text names nothing but
the URI.

A resource that answers in more than one MIME type (``synthesis://nodes/{+path}/thumbnail`` is a JPEG, or a node's
JSON when a real file is named "thumbnail") returns :class:`Content` through :func:`mixed_resource`; the SDK gives
every read of a template the template's MIME type, mcp_server.app.AssayServer.read_resource this answer's own.
"""

from __future__ import annotations

import functools
import json
import logging
from dataclasses import dataclass
from typing import Any, Callable

from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS

from dsl.errors import PlanError
from flows.media.common import no_space
from store.errors import AssayError, InvalidInput, NoSpace, NotFound

log = logging.getLogger(__name__)

JSON = "application/json"


def _resource_error(exc: AssayError | PlanError) -> Exception:
    """A NotFound as resource-not-found, a NoSpace as an internal error, any other error of ours as invalid params,
    all with our message (``NOT_FOUND: resource-set 'x' not found ...``) and, as data, its type and field."""
    if isinstance(exc, NotFound):
        return ResourceNotFoundError(str(exc))
    code = INTERNAL_ERROR if isinstance(exc, NoSpace) else INVALID_PARAMS
    return MCPError(code=code, message=str(exc), data={"type": exc.code, "field": exc.field})


def _full_disk_error(exc: Exception) -> Exception | None:
    """``exc`` as the NO_SPACE error when it says the disk is full (see ``flows.media.common.no_space``), else None
    (a crash, left to the SDK)."""
    full = no_space(exc)
    if full is None:
        return None
    log.warning("resource read: %s", exc, exc_info=exc)
    return _resource_error(full)


def json_resource(fn: Callable[..., Any]) -> Callable[..., str]:
    """Serialise the result; our errors as JSON-RPC errors (see ``_resource_error``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return json.dumps(fn(*args, **kwargs))
        except (AssayError, PlanError) as exc:
            raise _resource_error(exc) from exc
        except Exception as exc:
            full = _full_disk_error(exc)
            if full is None:
                raise
            raise full from exc

    return wrapper


@dataclass
class Content:
    """What a :func:`mixed_resource` returns: text or bytes, with the MIME type of this answer."""

    data: str | bytes
    mime_type: str


def json_content(value: Any) -> Content:
    return Content(json.dumps(value), JSON)


class _Text(str):
    """Text that carries its MIME type through the SDK (see :func:`answer`)."""

    mime_type: str


class _Blob(bytes):
    """Bytes that carry their MIME type through the SDK (see :func:`answer`)."""

    mime_type: str


def answer(content: Content) -> str | bytes:
    """``content`` as the str or bytes the SDK takes from a resource function unchanged, carrying its MIME type."""
    made = _Blob(content.data) if isinstance(content.data, bytes) else _Text(content.data)
    made.mime_type = content.mime_type
    return made


def answer_mime_type(value: object) -> str | None:
    """The MIME type :func:`answer` gave a resource's content; None for any other content."""
    return value.mime_type if isinstance(value, (_Text, _Blob)) else None


def mixed_resource(fn: Callable[..., Content]) -> Callable[..., str | bytes]:
    """A resource function answering :class:`Content`, registered as any other (``mcp.resource``): its answer keeps
    its own MIME type, our errors become JSON-RPC errors (see ``_resource_error``)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str | bytes:
        try:
            return answer(fn(*args, **kwargs))
        except (AssayError, PlanError) as exc:
            raise _resource_error(exc) from exc
        except Exception as exc:
            full = _full_disk_error(exc)
            if full is None:
                raise
            raise full from exc

    return wrapper


def int_param(value: str | None, *, field: str, default: int, low: int, high: int | None = None) -> int:
    """A whole-number URI parameter (``?limit=50``): ``default`` when absent, else ``low``..``high`` or refused."""
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < low or (high is not None and number > high):
        span = f"{low}-{high}" if high is not None else f"{low} or more"
        raise InvalidInput(f"{field} must be a whole number ({span}), got {value!r}", field=field)
    return number
