"""Entry filters shared by resource-search and saved queries: one checked model, compiled to SQL clauses.

Values are bound parameters and columns come from a fixed table, so nothing a caller sends is pasted into SQL.
"""

from __future__ import annotations

import re
from datetime import date, datetime, timezone
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator
from sqlalchemy import ColumnElement, func, or_

from store.entries import T, iso
from store.errors import InvalidInput

Kind = Literal["file", "directory", "symlink", "other"]
MediaType = Literal["image", "video", "audio", "document", "text", "other"]  # other: no known kind (NULL column)


def check_range(low: Any, high: Any, *, low_name: str = "min", high_name: str = "max", times: bool = False) -> None:
    """The one rule of every tool that takes a range: a lower bound above the upper bound is refused (it could
    only match nothing), naming both parameters. ``times``: the bounds are unix seconds, shown as ISO 8601."""
    if low is None or high is None or low <= high:
        return
    shown = (iso(low), iso(high)) if times else (low, high)
    relation = "is after" if times else "is greater than"
    raise InvalidInput(f"{low_name} ({shown[0]}) {relation} {high_name} ({shown[1]}); nothing can match. Give "
                       f"{low_name} <= {high_name}, or leave one of them out", field=low_name)


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
    media_type: MediaType | None = None  # image | video | audio | document | text | other
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
        flt.check(where)
        return flt

    def check(self, where: str | None = "query") -> "EntryFilter":
        """Times readable and every range non-empty (min <= max), the rule every tool follows; errors name the key
        under ``where`` (None: the key alone, as resource-search's parameters are named)."""
        def key(name: str) -> str:
            return f"{where}.{name}" if where else name

        times = {name: parse_time(getattr(self, name), field=key(name)) if name.startswith("min_")
                 else parse_end_time(getattr(self, name), field=key(name))
                 for name in ("min_mtime", "max_mtime", "min_ctime", "max_ctime") if getattr(self, name) is not None}
        if isinstance(self.extension, list) and not self.extension:  # IN () would match nothing, silently
            raise InvalidInput(f"{key('extension')} is an empty list, which matches nothing; give one or more "
                               'extensions (".jpg", "pdf"), or leave it out', field=key("extension"))
        check_range(self.min_size, self.max_size, low_name=key("min_size"), high_name=key("max_size"))
        for field in ("mtime", "ctime"):
            check_range(times.get(f"min_{field}"), times.get(f"max_{field}"), low_name=key(f"min_{field}"),
                        high_name=key(f"max_{field}"), times=True)
        return self

    def check_times(self, where: str = "query") -> None:  # kept for callers of the older name
        self.check(where)

    def clauses(self, case_sensitive: bool = False) -> list[ColumnElement[bool]]:
        """SQL clauses over the entries table ``T`` (bound parameters only)."""
        c = T.c
        out: list[ColumnElement[bool]] = []
        if self.kind:
            out.append(c.kind == self.kind)
        if self.extension:
            exts = [self.extension] if isinstance(self.extension, str) else self.extension
            out.append(c.extension.in_([normalize_extension(e) for e in exts]))
        if self.media_type == "other":  # as in plan conditions: no known kind (a NULL column) is other
            out.append(or_(c.media_type.is_(None), c.media_type == "other"))
        elif self.media_type:
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


def _contains(column: ColumnElement[Any], needle: str, case_sensitive: bool) -> ColumnElement[bool]:
    """Substring test; ``%`` and ``_`` in the needle are escaped, so they match literally (SQLite and PostgreSQL)."""
    if case_sensitive:
        return column.contains(needle, autoescape=True)
    return func.lower(column).contains(needle.lower(), autoescape=True)
