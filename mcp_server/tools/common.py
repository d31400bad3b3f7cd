"""Types and annotations shared by the tool modules."""

from __future__ import annotations

import functools
import inspect
import json
import logging
import re
import time
from typing import Annotated, Any

import anyio.from_thread
from mcp.server.mcpserver.tools import Tool
from mcp_types import INTERNAL_ERROR, INVALID_PARAMS, CallToolResult, TextContent, ToolAnnotations
from pydantic import (BeforeValidator, Field, ValidationError, WithJsonSchema, create_model, field_validator,
                      model_validator)
from pydantic_core import ErrorDetails, PydanticCustomError

from dsl.errors import PlanError
from flows.media.common import no_space
from store.errors import AssayError, FileOperationError, NoSpace

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


def _error_payload(code: int, type_: str, reason: str, field: Any = None, **extra: Any) -> dict[str, Any]:
    data = {"field": field, "reason": reason, "type": type_, **extra}
    return {"error": {"code": code, "message": "Internal error" if code == INTERNAL_ERROR else "Invalid params",
                      "data": data}}


def refusal(type_: str, reason: str, *, code: int = INVALID_PARAMS, field: Any = None,
            **extra: Any) -> CallToolResult:
    """A tool error every spec-following client passes to the model: ``isError``, the code and the whole message as
    the first text item (``NOT_FOUND: resource-set 'x' does not exist ...``), and reference 000's error object as
    JSON in a second text item (``{"error": {"code", "message", "data": {"field", "reason", "type"}}}``).

    There is no structured content: a client validates structured content against the tool's output schema, the
    TypeScript SDK even on an error result, and our error object does not fit any tool's result schema; it would
    turn our message into a protocol error the model never sees.
    """
    payload = _error_payload(code, type_, reason, field, **extra)
    return CallToolResult(content=[TextContent(type="text", text=f"{type_}: {reason}"),
                                   TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
                          is_error=True)


def error_result(tool_name: str, exc: AssayError | PlanError) -> CallToolResult:
    """One of our errors as a tool error (see ``refusal``).

    (The SDK hides the text of any exception that is not a ToolError, as a crash; ours are deliberate and carry
    what was wrong, where, and what would be accepted. A tool error rather than a JSON-RPC error, so that a model
    sees it and can correct its call.)
    """
    logger.info("tool %s refused: %s", tool_name, exc)
    # the server's own trouble, not the call's: a file operation that failed, a full disk (NO_SPACE)
    code = INTERNAL_ERROR if isinstance(exc, (FileOperationError, NoSpace)) else INVALID_PARAMS
    extra = {}
    if isinstance(exc, PlanError) and exc.problems:
        extra["problems"] = [p.as_dict() for p in exc.problems]
    details = getattr(exc, "details", None)
    if details:
        extra["details"] = details  # reference 001's error details ({"path": ...})
    return refusal(exc.code, str(exc).removeprefix(f"{exc.code}: "), code=code, field=exc.field, **extra)


def crash_result(tool_name: str) -> CallToolResult:
    """A tool that failed in a way we did not foresee: the same shape, nothing of the crash but that it happened."""
    return refusal("INTERNAL_ERROR", f"{tool_name} failed unexpectedly; the server's log has the details",
                   code=INTERNAL_ERROR)


def _describe(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


# pydantic's words for a wrong JSON type, said as JSON says them (never "dictionary", never a class name)
_EXPECTED = {
    "string_type": "a string", "string_sub_type": "a string", "int_type": "a whole number",
    "int_parsing": "a whole number", "int_from_float": "a whole number", "float_type": "a number",
    "float_parsing": "a number", "bool_type": "true or false", "bool_parsing": "true or false",
    "list_type": "an array", "tuple_type": "an array", "set_type": "an array", "dict_type": "an object",
    "model_type": "an object", "model_attributes_type": "an object", "dataclass_type": "an object",
    "none_required": "null", "json_scalar": None,
}
# pydantic names the member of a union (or a wrapped validator) in an error's location: "value.str",
# "moves.0.PathOp", "paths.function-before[_as_list(), list[str]]"; these are not parameters
_TYPE_TAG = re.compile(r"[a-z]+(?:-[a-z]+)*\[.*\]|str|int|float|bool|none|list|dict|bytes|literal|tuple|set|any|json")


def _parameter_path(loc: tuple) -> str | None:
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif _TYPE_TAG.fullmatch(part) or part[:1].isupper():
            continue
        else:
            path += ("." if path else "") + part
    return path or None


def _message(err: ErrorDetails) -> str:
    ctx = err.get("ctx") or {}
    if err["type"] == "too_short":  # pydantic: "List should have at least 1 item after validation, not 0"
        return f"input should have at least {ctx.get('min_length')} item(s)"
    if err["type"] == "too_long":
        return f"input should have at most {ctx.get('max_length')} item(s)"
    if err["type"] == "extra_forbidden":
        return "unknown key here"
    return err["msg"].removeprefix("Value error, ")


def _problem(field: str | None, errors: list[ErrorDetails]) -> str:
    """One sentence for one parameter, from every error pydantic reported on it (several for a union)."""
    if any(e["type"] == "missing" for e in errors):
        return f"parameter {field!r} is required"
    specific = [e for e in errors if e["type"] not in _EXPECTED]
    if specific or any(e["type"] == "json_scalar" for e in errors):
        chosen = specific or [e for e in errors if e["type"] == "json_scalar"]
        messages = list(dict.fromkeys(_message(e) for e in chosen))
        message = "; ".join(m[0].lower() + m[1:] for m in messages)
    else:
        wanted = list(dict.fromkeys(w for e in errors if (w := _EXPECTED[e["type"]]) is not None))
        message = "input should be " + (" or ".join(wanted) if len(wanted) < 3
                                        else ", ".join(wanted[:-1]) + " or " + wanted[-1])
    if field is None:
        return message
    return f"parameter {field!r}: {message} (got {_describe(errors[0]['input'])})"


def argument_error_result(tool_name: str, exc: ValidationError) -> CallToolResult:
    """Arguments that do not fit a tool's schema, said plainly: each parameter, what was wrong, what was sent; in
    JSON's words (object, array, whole number), never pydantic's type or class names."""
    grouped: dict[str | None, list[ErrorDetails]] = {}
    for err in exc.errors():
        grouped.setdefault(_parameter_path(err["loc"]), []).append(err)
    problems = [_problem(field, errors) for field, errors in grouped.items()]
    fields = [field for field in grouped if field]
    reason = f"{tool_name}: {'; '.join(problems)}"
    logger.info("tool %s rejected arguments: %s", tool_name, fields)
    return refusal("INVALID_PARAMS", reason, field=fields[0] if len(fields) == 1 else (fields or None))


class McpProgress:
    """MCP progress for one tool call, fed from the worker thread doing the work: at most one notification every
    ``interval`` seconds, each higher than the last (the spec wants progress to increase), out of 100, and 100 when
    the work is done. Nothing is sent unless the client gave a progressToken (the SDK drops it then)."""

    def __init__(self, ctx, *, interval: float = 0.25) -> None:
        self.ctx, self.interval = ctx, interval
        self.sent = -1.0
        self.last = float("-inf")

    def update(self, percent: float, message: str | None = None) -> None:
        """From a worker thread (anyio.to_thread): report ``percent`` (0-100) if it is time and it went up."""
        value = round(min(max(float(percent), 0.0), 99.9), 1)  # 100 only once finished
        now = time.monotonic()
        if value <= self.sent or now - self.last < self.interval:
            return
        self.sent, self.last = value, now
        try:
            anyio.from_thread.run(self.ctx.report_progress, value, 100.0, message)
        except Exception:  # progress is best effort; the work goes on
            logger.debug("progress notification not sent", exc_info=True)

    async def finish(self, message: str | None = None) -> None:
        """On the event loop, once the work succeeded: 100 of 100."""
        if self.sent < 100.0:
            self.sent = 100.0
            try:
                await self.ctx.report_progress(100.0, 100.0, message)
            except Exception:
                logger.debug("progress notification not sent", exc_info=True)


class ToolSet:
    """The tools one server offers, in the order they were made: every group's ``register(tools, app)`` adds its
    tools here (through ``tool`` below), and the server is built with them all (``MCPServer(tools=...)``). The server
    asks us which tools it has (``names``), never the SDK's tool manager."""

    def __init__(self) -> None:
        self._tools: dict[str, Tool] = {}

    def add(self, made: Tool) -> None:
        if made.name in self._tools:
            raise ValueError(f"tool {made.name!r} is registered twice")
        self._tools[made.name] = made

    def list(self) -> list[Tool]:
        return list(self._tools.values())

    def names(self) -> frozenset[str]:
        return frozenset(self._tools)


def tool(tools: ToolSet, name: str, annotations: ToolAnnotations):
    """Register a tool whose AssayErrors reach the caller as tool errors (see ``error_result``) and that refuses
    arguments it does not know (see ``_reject_unknown_arguments``). Any other failure that says the disk is full
    (an OSError ENOSPC from a file the tool wrote, MuPDF's or SQLite's words for it) is NO_SPACE too, not a crash."""

    def decorator(fn):
        if inspect.iscoroutinefunction(fn):
            @functools.wraps(fn)
            async def wrapper(*args, **kwargs):
                try:
                    return await fn(*args, **kwargs)
                except (AssayError, PlanError) as exc:
                    return error_result(name, exc)
                except Exception as exc:
                    return _full_disk_result(name, exc)
        else:
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                try:
                    return fn(*args, **kwargs)
                except (AssayError, PlanError) as exc:
                    return error_result(name, exc)
                except Exception as exc:
                    return _full_disk_result(name, exc)
        made = Tool.from_function(wrapper, name=name, annotations=annotations,
                                  description=inspect.cleandoc(fn.__doc__ or ""))
        _reject_unknown_arguments(made)
        tools.add(made)
        return fn

    return decorator


def _full_disk_result(tool_name: str, exc: Exception) -> CallToolResult:
    """``exc`` as a NO_SPACE tool error when it says the disk is full; raised again otherwise (a crash)."""
    full = no_space(exc)
    if full is None:
        raise exc
    logger.warning("tool %s: %s", tool_name, exc, exc_info=exc)
    return error_result(tool_name, full)


def _reject_unknown_arguments(registered: Tool) -> None:
    """Make a tool refuse arguments it does not know, naming them and the accepted ones.

    The SDK's argument models ignore extra keys, so a misspelt optional parameter ("descripton", "maxage") would be
    dropped without a word and the call would quietly do something else: the fault reference 000's users hit with
    plan conditions. The JSON schema says so too (additionalProperties: false).
    """
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

    validators: dict[str, Any] = {"reject_unknown": model_validator(mode="before")(reject)}
    properties = registered.parameters.get("properties", {})
    for field_name, alias in zip(base.model_fields, accepted):
        kinds = _json_kinds(properties.get(alias, {}))
        if "string" not in kinds and kinds & {"boolean", "integer", "number"}:
            validators[f"json_scalar_{field_name}"] = field_validator(field_name, mode="before")(
                _json_scalar_validator(kinds))
    meta.arg_model = create_model(base.__name__, __base__=base, __validators__=validators)
    registered.parameters["additionalProperties"] = False


def _json_kinds(schema: dict) -> set[str]:
    """The JSON types a parameter's schema accepts (its own ``type`` and those of its ``anyOf`` members)."""
    kinds = set()
    for part in [schema, *schema.get("anyOf", [])]:
        kind = part.get("type")
        kinds.update(kind if isinstance(kind, list) else [kind] if kind else [])
    return kinds


_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_MAX_NUMBER_TEXT = 100


def _json_scalar_validator(kinds: set[str]):
    """The one rule for numbers and booleans, in every tool: a JSON value of the type, or a string spelling one
    exactly as JSON does ("10", "-2.5", "1e3", "true", "false"); nothing else ("yes", "1" or 1 for a boolean, true
    for a number, "10 MB"). pydantic alone would take "yes", "on" and 1 as true, and true as the number 1."""
    numeric = bool(kinds & {"integer", "number"})
    boolean = "boolean" in kinds
    wanted = " or ".join(w for w, on in (("true or false", boolean),
                                           ("a whole number" if "number" not in kinds else "a number", numeric),
                                           ("null", "null" in kinds)) if on)

    spelt = " or ".join(w for w, on in (('"true" / "false"', boolean), ('"10"', numeric)) if on)

    def refuse(value: Any) -> PydanticCustomError:
        return PydanticCustomError("json_scalar", "input should be {wanted} (a string is accepted only as JSON "
                                   "writes the value: {spelt})", {"wanted": wanted, "spelt": spelt})

    def check(value: Any) -> Any:
        if isinstance(value, bool):
            if not boolean:
                raise refuse(value)
        elif isinstance(value, (int, float)):
            if not numeric:
                raise refuse(value)
        elif isinstance(value, str):
            if boolean and value in ("true", "false"):
                return value == "true"
            if numeric and len(value) <= _MAX_NUMBER_TEXT and _JSON_NUMBER.fullmatch(value):
                return json.loads(value)
            raise refuse(value)
        return value

    return check
