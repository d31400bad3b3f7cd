"""Types and annotations shared by the tool modules."""

from __future__ import annotations

import json
import logging
from typing import Annotated, Any

from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import BeforeValidator, Field, ValidationError, WithJsonSchema

from dsl.errors import PlanError
from store.errors import AssayError, FileOperationError

logger = logging.getLogger(__name__)


def _as_list(value: Any) -> Any:
    """LLM clients often send one string where a list is expected ("paths": "/foo"); accept both."""
    if isinstance(value, str):
        return [value]
    return value


StrList = Annotated[
    list[str],
    BeforeValidator(_as_list),
    WithJsonSchema({"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "string"}]}),
]


def as_object_list(value: Any) -> Any:
    """A single {from, to} object where an array of them is expected is accepted as a one-item list."""
    if isinstance(value, dict):
        return [value]
    return value


READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, idempotentHint=True, openWorldHint=False)
WRITES = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=False, openWorldHint=False)
IDEMPOTENT_WRITE = ToolAnnotations(readOnlyHint=False, destructiveHint=False, idempotentHint=True,
                                   openWorldHint=False)
DESTRUCTIVE = ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False, openWorldHint=False)

Limit = Annotated[int, Field(ge=1, le=10000, description="Maximum entries to return (1-10000)")]
Offset = Annotated[int, Field(ge=0, description="Pagination offset (0 or more)")]


def error_result(tool_name: str, exc: AssayError | PlanError) -> CallToolResult:
    """A tool error the model can read (isError, the full message as text) that also carries reference 000's error
    object as structured content: ``{"error": {"code", "message", "data": {"field", "reason", "type"}}}``.

    (The SDK hides the text of any exception that is not a ToolError, as a crash; ours are deliberate and carry
    what was wrong, where, and what would be accepted. A tool error rather than a JSON-RPC error, so that a model
    sees it and can correct its call.)
    """
    logger.info("tool %s refused: %s", tool_name, exc)
    code = INTERNAL_ERROR if isinstance(exc, FileOperationError) else INVALID_PARAMS
    error = {"code": code, "message": "Internal error" if code == INTERNAL_ERROR else "Invalid params",
             "data": {"field": exc.field, "reason": exc.message, "type": exc.code}}
    if isinstance(exc, PlanError) and exc.problems:
        error["data"]["problems"] = [p.as_dict() for p in exc.problems]
    return CallToolResult(content=[TextContent(type="text", text=str(exc))], structured_content={"error": error},
                          is_error=True)


def _describe(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def argument_error_result(tool_name: str, exc: ValidationError) -> CallToolResult:
    """Arguments that do not fit a tool's schema, said plainly: each parameter, what was wrong, what was sent."""
    problems, fields = [], []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or None
        message = err["msg"].removeprefix("Value error, ")
        if err["type"] == "missing":
            problems.append(f"parameter {field!r} is required")
        elif field is None:
            problems.append(message)
        else:
            problems.append(f"parameter {field!r}: {message[0].lower() + message[1:]} (got {_describe(err['input'])})")
        if field:
            fields.append(field)
    reason = f"{tool_name}: {'; '.join(problems)}"
    logger.info("tool %s rejected arguments: %s", tool_name, fields)
    error = {"code": INVALID_PARAMS, "message": "Invalid params",
             "data": {"field": fields[0] if len(fields) == 1 else (fields or None), "reason": reason,
                      "type": "INVALID_PARAMS"}}
    return CallToolResult(content=[TextContent(type="text", text=f"INVALID_PARAMS: {reason}")],
                          structured_content={"error": error}, is_error=True)


def tool(mcp, name: str, annotations: ToolAnnotations):
    """Register a tool whose AssayErrors reach the caller as tool errors (see ``error_result``)."""
    import functools
    import inspect

    def decorator(fn):
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapper(*args, **kwargs):
                try:
                    return await fn(*args, **kwargs)
                except (AssayError, PlanError) as exc:
                    return error_result(name, exc)
        else:
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                try:
                    return fn(*args, **kwargs)
                except (AssayError, PlanError) as exc:
                    return error_result(name, exc)
        mcp.add_tool(wrapper, name=name, annotations=annotations, description=inspect.cleandoc(fn.__doc__ or ""))
        _reject_unknown_arguments(mcp._tool_manager.get_tool(name))
        return fn

    return decorator


def _reject_unknown_arguments(registered) -> None:
    """Make a tool refuse arguments it does not know, naming them and the accepted ones.

    The SDK's argument models ignore extra keys, so a misspelt optional parameter ("descripton", "maxage") would be
    dropped without a word and the call would quietly do something else: the fault reference 000's users hit with
    plan conditions. The JSON schema says so too (additionalProperties: false).
    """
    from pydantic import create_model, model_validator

    meta = registered.fn_metadata
    base = meta.arg_model
    accepted = []
    for field_name, info in base.model_fields.items():
        alias = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
        accepted.append(alias or field_name)

    def reject(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = [key for key in data if key not in accepted]
            if unknown:
                names = ", ".join(repr(k) for k in unknown)
                raise ValueError(f"unknown parameter(s) {names}; "
                                 f"accepted: {', '.join(accepted) or 'none'}")
        return data

    meta.arg_model = create_model(base.__name__, __base__=base,
                                  __validators__={"reject_unknown": model_validator(mode="before")(reject)})
    registered.parameters["additionalProperties"] = False
