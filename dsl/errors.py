"""Plan errors: every one names its place (line and column with a caret for DSL text, the YAML/JSON path for
structured input) and what would be accepted.

``dsl`` depends on nothing else of assay's, so these mirror ``store.errors.AssayError``'s shape (``code``, ``message``,
``field``) and the MCP layer turns both into tool errors the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class Problem:
    """One thing wrong with a plan, and where."""

    message: str
    path: str | None = None  # "rules[0].when.conditions[1].minSize" for structured input
    line: int | None = None  # 1-based, for text input (DSL, or YAML when known)
    column: int | None = None  # 1-based
    context: str | None = None  # the offending line and a caret under the column

    @property
    def where(self) -> str:
        parts = []
        if self.line is not None:
            parts.append(f"line {self.line}" + (f", column {self.column}" if self.column is not None else ""))
        if self.path:
            parts.append(self.path)
        return " at ".join(parts) if parts else "plan"

    def render(self) -> str:
        text = f"{self.where}: {self.message}"
        if self.context:
            text += "\n" + self.context
        return text

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in {"message": self.message, "path": self.path, "line": self.line,
                                  "column": self.column, "context": self.context}.items() if v is not None}


class AssayError(Exception):
    """Base of every error assay raises on purpose, in every layer (``store.errors`` holds the common kinds; a plan's
    are :class:`PlanError`). ``code`` is stable (reference 001's named codes where one applies); ``message`` says what
    was wrong, where, and what would be accepted; ``field`` names the parameter it concerns."""

    code = "ASSAY_ERROR"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.field = field

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class PlanError(AssayError, ValueError):
    """A plan that cannot be used; ``problems`` lists every thing wrong with it that was found."""

    code = "INVALID_PLAN"

    def __init__(self, message: str | None = None, *, problems: list[Problem] | None = None,
                 field: str | None = None, source: str | None = None) -> None:
        self.problems = list(problems or [])
        if message is None:
            message = self.summary()
        super().__init__(message, field=field if field is not None else
                         (self.problems[0].path if self.problems else None))
        self.source = source  # the file the plan came from, when there was one

    def summary(self) -> str:
        if not self.problems:
            return "invalid plan"
        if len(self.problems) == 1:
            return self.problems[0].render()
        return f"{len(self.problems)} problems:\n" + "\n".join(f"- {p.render()}" for p in self.problems)

    def __str__(self) -> str:
        where = f"{self.source}: " if self.source else ""
        return f"{self.code}: {where}{self.message}"


class PlanSyntaxError(PlanError):
    """DSL or expression text that does not parse."""

    code = "PLAN_SYNTAX_ERROR"


class PlanValidationError(PlanError):
    """Input that parses but is not a valid plan: unknown keys, fields, units, outcome or source types, ..."""

    code = "PLAN_VALIDATION_ERROR"


CONTEXT_WIDTH = 100  # characters of a long line shown around the caret


def caret_context(text: str, line: int, column: int) -> str:
    """The ``line``-th line of ``text`` (1-based) and a caret under ``column`` (1-based); a long line is cut to
    the part around the column, with ``...`` where it was cut."""
    lines = text.splitlines() or [""]
    src = lines[line - 1] if 0 < line <= len(lines) else ""
    at = max(column - 1, 0)
    if len(src) > CONTEXT_WIDTH:
        start = max(0, min(at - CONTEXT_WIDTH // 2, len(src) - CONTEXT_WIDTH))
        end = start + CONTEXT_WIDTH
        head, tail = ("..." if start > 0 else ""), ("..." if end < len(src) else "")
        src, at = head + src[start:end] + tail, at - start + len(head)
    return f"    {src}\n    {' ' * at}^"

