"""What every synthesis:// resource module shares: results as JSON, our errors as MCP resource errors."""

from __future__ import annotations

import functools
import json
from typing import Any, Callable

from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError

from dsl.errors import PlanError
from store.errors import AssayError, NotFound


def json_resource(fn: Callable[..., Any]) -> Callable[..., str]:
    """Serialise the result; a NotFound becomes resource-not-found, any other error of ours a resource error that
    keeps its message."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> str:
        try:
            return json.dumps(fn(*args, **kwargs))
        except NotFound as exc:
            raise ResourceNotFoundError(str(exc)) from exc
        except (AssayError, PlanError) as exc:
            raise ResourceError(str(exc)) from exc

    return wrapper
