"""What every synthesis:// resource module shares: results as JSON, our errors as the JSON-RPC errors a client expects.

A read the caller got wrong is an invalid-params error (-32602) with our message: bad input (a limit that is not a
number, an unknown metric, a malformed job id), a path outside the roots, and a thing that does not exist (the SDK's
resource-not-found, also -32602). Only a crash is an internal error (-32603), and its text names nothing but the URI.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS

from dsl.errors import PlanError
from store.errors import AssayError, InvalidInput, NotFound


def json_resource(fn: Callable[..., Any]) -> Callable[..., str]:
    """Serialise the result; a NotFound becomes resource-not-found, any other error of ours invalid params, both
    with our message (``NOT_FOUND: resource-set 'x' not found ...``) and, as data, its type and field."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return json.dumps(fn(*args, **kwargs))
        except NotFound as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except (AssayError, PlanError) as exc:
            raise MCPError(code=INVALID_PARAMS, message=str(exc),
                           data={"type": exc.code, "field": exc.field}) from exc

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
