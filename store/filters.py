"""Entry filters shared by resource-search and saved queries: one checked model, compiled to SQL clauses.

Values are bound parameters and columns come from a fixed table, so nothing a caller sends is pasted into SQL.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from sqlalchemy import func

from store.entries import T
from store.errors import InvalidInput

Kind = Literal["file", "directory", "symlink", "other"]


def parse_time(value: Any, *, field: str) -> float:
    """Unix seconds from a unix timestamp (number or numeric string) or an ISO 8601 date / date-time (UTC if naive)."""
    if isinstance(value, bool):
        raise InvalidInput(f"{field} must be an ISO 8601 date or a unix timestamp, got {value!r}", field=field)
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+(\.\d+)?", text):
            return float(text)
        try:
            if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
                parsed = datetime.combine(date.fromisoformat(text), datetime.min.time())
            else:
                parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            pass
        else:
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=timezone.utc)
            return parsed.timestamp()
    raise InvalidInput(
        f"{field} {value!r} is not a time; use an ISO 8601 date (2024-01-31), date-time (2024-01-31T12:00:00Z) "
        "or unix seconds (1706702400)", field=field,
    )


def parse_end_time(value: Any, *, field: str) -> float:
    """Like :func:`parse_time`, but a bare date means the end of that day (max "2024-12-31" includes the 31st)."""
    if isinstance(value, str) and re.fullmatch(r"\d{4}-\d{2}-\d{2}", value.strip()):
        return parse_time(value, field=field) + 86400 - 1e-6
    return parse_time(value, field=field)


def normalize_extension(ext: str) -> str:
    ext = ext.strip().lower()
    return ext if ext.startswith(".") or not ext else "." + ext


class EntryFilter(BaseModel):
    """Filters on stored entry fields; every given one must hold (AND). Unknown keys are rejected."""

    model_config = ConfigDict(extra="forbid")

    kind: Kind | None = None
    extension: str | list[str] | None = None  # ".jpg", "jpg", or a list of them
    media_type: str | None = None  # image | video | audio | document | text
    path_contains: str | None = None
    path_prefix: str | None = None
    name_contains: str | None = None
    parent: str | None = None
    min_size: int | None = None
    max_size: int | None = None
    min_mtime: str | float | None = None
    max_mtime: str | float | None = None
    min_ctime: str | float | None = None
    max_ctime: str | float | None = None

    @field_validator("min_size", "max_size")
    @classmethod
    def _non_negative(cls, v: int | None) -> int | None:
        if v is not None and v < 0:
            raise ValueError("must be 0 or more bytes")
        return v

    @classmethod
    def parse(cls, data: dict[str, Any] | None, *, where: str = "query") -> "EntryFilter":
        """Validate ``data``; errors name each bad key under ``where`` and list the accepted keys."""
        if data is None:
            return cls()
        if not isinstance(data, dict):
            raise InvalidInput(f"{where} must be an object of filters such as "
                               '{"kind": "file", "extension": ".mp4", "min_size": 1073741824}', field=where)
        try:
            flt = cls.model_validate(data)
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                key = ".".join(str(p) for p in err["loc"])
                if err["type"] == "extra_forbidden":
                    problems.append(f"unknown key {where}.{key}")
                else:
                    problems.append(f"{where}.{key}: {err['msg']}")
            raise InvalidInput(f"{'; '.join(problems)}. Accepted keys: {', '.join(cls.model_fields)}",
                               field=where) from None
        flt.check_times(where)
        return flt

    def check_times(self, where: str = "query") -> None:
        for name in ("min_mtime", "max_mtime", "min_ctime", "max_ctime"):
            value = getattr(self, name)
            if value is not None:
                parse_time(value, field=f"{where}.{name}")

    def clauses(self, case_sensitive: bool = False) -> list:
        """SQL clauses over the entries table ``T`` (bound parameters only)."""
        c = T.c
        out: list = []
        if self.kind:
            out.append(c.kind == self.kind)
        if self.extension:
            exts = [self.extension] if isinstance(self.extension, str) else self.extension
            out.append(c.extension.in_([normalize_extension(e) for e in exts]))
        if self.media_type:
            out.append(c.media_type == self.media_type)
        for column, needle in ((c.path, self.path_contains), (c.name, self.name_contains)):
            if needle:
                out.append(_contains(column, needle, case_sensitive))
        if self.path_prefix:
            out.append(c.path.startswith(self.path_prefix, autoescape=True))
        if self.parent:
            out.append(c.parent == self.parent)
        if self.min_size is not None:
            out.append(c.size >= self.min_size)
        if self.max_size is not None:
            out.append(c.size <= self.max_size)
        for column, lo, hi, name in ((c.mtime, self.min_mtime, self.max_mtime, "mtime"),
                                     (c.ctime, self.min_ctime, self.max_ctime, "ctime")):
            if lo is not None:
                out.append(column >= parse_time(lo, field=f"min_{name}"))
            if hi is not None:
                out.append(column <= parse_end_time(hi, field=f"max_{name}"))
        return out


def _contains(column, needle: str, case_sensitive: bool):
    """Substring test; ``%`` and ``_`` in the needle are escaped, so they match literally (SQLite and PostgreSQL)."""
    if case_sensitive:
        return column.contains(needle, autoescape=True)
    return func.lower(column).contains(needle.lower(), autoescape=True)
