"""Name and destination templates of the file outcomes (``move``/``copy`` to ``to:``, ``rename`` by ``name:``).

A template is text with fields in braces, rendered once per file from the plan's fields::

    Documents/{mtime:%Y}/                       -> Documents/2023/            (the file keeps its name)
    Photos/{exif.DateTimeOriginal:%Y-%m}/       -> Photos/2023-07/
    {exif.Model|unknown}/{stem}.{extension}     -> unknown/IMG_0001.jpg       (no camera model: the fallback)
    {label|}{name}                              -> report.pdf                 (an empty fallback)
    scan-{size:08d}.pdf                         -> scan-00012345.pdf
    {{draft}} {name}                            -> {draft} report.pdf         ({{ and }} are literal braces)

Syntax:

- literal text is kept as written (slashes included); ``{{`` and ``}}`` are a literal ``{`` and ``}``;
- ``{field}``, ``{field:format}``, ``{field|fallback}``, ``{field:format|fallback}``;
- a field name is parts joined by ``.``: the first ``[A-Za-z_][A-Za-z0-9_]*``, the later ones may also hold ``-`` and
  start with a digit (``exif.DateTimeOriginal``, ``metadata.title``, ``label``, ``mtime``, ``name``, ``stem``,
  ``extension``, ``parent``); at most :data:`MAX_FIELD_NAME` characters;
- the format runs from the first ``:`` to ``|`` or ``}`` (so ``{mtime:%H:%M}`` works). One holding ``%`` before its
  last character is a strftime format, and the value must be a date: a ``datetime`` (or ``date``), a number of epoch
  seconds (converted with ``datetime.fromtimestamp``: local time, as the file manager shows it), or a string in EXIF
  form ``2023:07:14 10:22:01`` (sub-seconds and an offset allowed) or ISO 8601. Any other format is a Python format
  spec (``{size:08d}``, ``{ratio:.0%}``); a string that reads as a number is formatted as that number;
- the fallback is the literal text from the first ``|`` to ``}`` (it may be empty, may hold ``:`` and ``|``, not ``{``
  or ``}``); it is used when the file lacks the field, and when the field's value cannot take the format (an EXIF
  date of ``0000:00:00 00:00:00``). Without a fallback either case is that file's :class:`MissingField`.

A value is made safe for one path component: ``/``, ``\\`` and NUL become ``_``, surrounding whitespace is stripped,
and a value that is exactly ``.`` or ``..`` becomes ``_``. Literal text, fallbacks and the text of a date format are
the plan author's and are kept as written (``{mtime:%Y/%m}/`` makes a folder per year and one per month in it).

The parser is one left-to-right pass over the text (no regular expression), so its time is linear in the length;
templates are limited to :data:`MAX_TEMPLATE` characters and :data:`MAX_FIELDS` fields.
"""

from __future__ import annotations

import string
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

MAX_TEMPLATE = 1_000  # characters
MAX_FIELDS = 50  # fields ({...}) in one template
MAX_FIELD_NAME = 200  # characters of one field name

SYNTAX = 'write {field}, {field:format} or {field|fallback}, and {{ for a literal "{"'
NAME_RULE = ('a field name is letters, digits and "_" (not starting with a digit), in parts joined by "."; parts '
             'after the first may also hold "-" and start with a digit, e.g. {name}, {exif.DateTimeOriginal}')
DATE_FORMS = ("a datetime, a number of epoch seconds, or a string like 2023:07:14 10:22:01 (EXIF) or "
              "2023-07-14T10:22:01 (ISO 8601)")

_FIRST = frozenset(string.ascii_letters + "_")
_LATER = frozenset(string.ascii_letters + string.digits + "_")
_PART = _LATER | {"-"}
_UNSAFE = str.maketrans({"/": "_", "\\": "_", "\0": "_"})


class TemplateError(ValueError):
    """A template that cannot be parsed: the message quotes it, names the 1-based ``column`` and what is accepted."""

    def __init__(self, text: str, column: int, problem: str) -> None:
        shown = text if len(text) <= 80 else text[:77] + "..."
        super().__init__(f'template "{shown}": {problem}')
        self.text = text
        self.column = column


class MissingField(LookupError):
    """A field this file lacks (or whose value cannot take the format), in a template that gives no fallback: the
    file's error, not the plan's."""

    def __init__(self, field: str, template: str, message: str | None = None) -> None:
        self.field = field
        self.template = template
        self.message = message or (f'the template "{template}" needs {field}, which this file does not have; '
                                   f"give a fallback: {{{field}|unknown}}")
        super().__init__(self.message)

    def __str__(self) -> str:
        return self.message


class FieldFormatError(MissingField):
    """A field whose value cannot take the template's format (a text for a date format, a date for ``08d``)."""


@dataclass(frozen=True)
class Placeholder:
    """One ``{field:format|fallback}`` of a template; ``column`` is where its ``{`` stands (1-based)."""

    name: str
    format: str | None
    fallback: str | None
    column: int


@dataclass(frozen=True)
class Template:
    """A parsed template; ``Template(text)`` parses (:class:`TemplateError` on bad syntax), :meth:`render` fills it."""

    text: str
    parts: tuple[str | Placeholder, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "parts", _scan(self.text))

    def fields(self) -> tuple[str, ...]:
        """The field names the template reads, in order of first use, each once."""
        return tuple(dict.fromkeys(p.name for p in self.parts if isinstance(p, Placeholder)))

    def render(self, lookup: Callable[[str], Any]) -> str:
        """The text for one file; ``lookup(field)`` gives a field's value, or None (or raises KeyError) when the
        file lacks it, and is called at most once per field. :class:`MissingField` when a field without a fallback
        is missing or cannot take its format."""
        values: dict[str, Any] = {}
        out: list[str] = []
        for part in self.parts:
            if isinstance(part, str):
                out.append(part)
                continue
            if part.name not in values:
                try:
                    values[part.name] = lookup(part.name)
                except KeyError:
                    values[part.name] = None
            value = values[part.name]
            if value is None:
                if part.fallback is None:
                    raise MissingField(part.name, self.text, _missing_message(self.text, part))
                out.append(part.fallback)
                continue
            try:
                text = _format(value, part.format)
            except ValueError as exc:
                if part.fallback is None:
                    raise FieldFormatError(part.name, self.text, _format_message(self.text, part, value, exc)) \
                        from None
                out.append(part.fallback)
                continue
            # a date's text is the format's, written by the plan's author: {mtime:%Y/%m} makes two folders
            out.append(text if part.format and is_date_format(part.format) else safe_component(text))
        return "".join(out)


def parse_template(text: str) -> Template:
    """``text`` parsed (:class:`TemplateError` on bad syntax)."""
    return Template(text)


def safe_component(text: str) -> str:
    """``text`` as one path component: ``/``, ``\\`` and NUL become ``_``, surrounding whitespace goes, and ``.`` or
    ``..`` become ``_``."""
    text = text.translate(_UNSAFE).strip()
    return "_" if text in (".", "..") else text


# --- parsing -----------------------------------------------------------------------------------------------------

def _scan(text: str) -> tuple[str | Placeholder, ...]:
    """The literal runs and placeholders of ``text``, in one pass."""
    if len(text) > MAX_TEMPLATE:
        raise TemplateError(text, MAX_TEMPLATE + 1, f"{len(text):,} characters long; a template is at most "
                                                    f"{MAX_TEMPLATE:,} characters")
    if not text:
        raise TemplateError(text, 1, f"empty; give the name or the folder to use, e.g. Documents/{{mtime:%Y}}/ "
                                     f"({SYNTAX})")
    parts: list[str | Placeholder] = []
    literal: list[str] = []
    count = 0
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\0":
            raise TemplateError(text, i + 1, f"a NUL character at column {i + 1}; no path can hold one")
        if ch == "}":
            if i + 1 < n and text[i + 1] == "}":
                literal.append("}")
                i += 2
                continue
            raise TemplateError(text, i + 1, f'a "}}" at column {i + 1} closes no field; {SYNTAX}, and }}}} for a '
                                             f'literal "}}"')
        if ch != "{":
            literal.append(ch)
            i += 1
            continue
        if i + 1 < n and text[i + 1] == "{":
            literal.append("{")
            i += 2
            continue
        count += 1
        if count > MAX_FIELDS:
            raise TemplateError(text, i + 1, f"more than {MAX_FIELDS} fields (field {count} at column {i + 1}); "
                                             f"a template holds at most {MAX_FIELDS}")
        end = i + 1
        while end < n and text[end] not in "{}":
            end += 1
        if end == n:
            raise TemplateError(text, i + 1, f'a "{{" at column {i + 1} is not closed; {SYNTAX}')
        if text[end] == "{":
            raise TemplateError(text, end + 1, f'a "{{" at column {end + 1} inside the field opened at column '
                                               f'{i + 1}; fields do not nest and a fallback cannot hold braces; '
                                               f'close the field with "}}" first; {SYNTAX}')
        if literal:
            parts.append("".join(literal))
            literal = []
        parts.append(_placeholder(text, i, end))
        i = end + 1
    if literal:
        parts.append("".join(literal))
    return tuple(parts)


def _placeholder(text: str, start: int, end: int) -> Placeholder:
    """The field between the ``{`` at ``start`` and the ``}`` at ``end``."""
    stop = start + 1
    while stop < end and text[stop] not in ":|":
        stop += 1
    name = text[start + 1:stop]
    _check_name(text, name, start + 2)
    fmt: str | None = None
    fallback: str | None = None
    if stop < end and text[stop] == ":":
        bar = stop + 1
        while bar < end and text[bar] != "|":
            bar += 1
        fmt = text[stop + 1:bar] or None
        stop = bar
    if stop < end:  # text[stop] == "|"
        fallback = text[stop + 1:end]
    return Placeholder(name, fmt, fallback, start + 1)


def _check_name(text: str, name: str, column: int) -> None:
    """TemplateError unless ``name`` (starting at ``column``) is a field name."""
    if not name:
        raise TemplateError(text, column - 1, f"the field at column {column - 1} has no name; {SYNTAX}, e.g. "
                                              f"{{name}}, {{mtime:%Y}}, {{exif.Model|unknown}}")
    if len(name) > MAX_FIELD_NAME:
        raise TemplateError(text, column, f"the field name at column {column} is {len(name):,} characters long; "
                                          f"a field name is at most {MAX_FIELD_NAME}")
    first_part, part_start = True, True
    for offset, ch in enumerate(name):
        if ch == ".":
            if part_start:
                raise TemplateError(text, column + offset, f'the field name "{name}" has an empty part before the '
                                                           f'"." at column {column + offset}; {NAME_RULE}')
            first_part, part_start = False, True
            continue
        allowed = (_FIRST if part_start else _LATER) if first_part else _PART
        if ch not in allowed:
            raise TemplateError(text, column + offset, f'the field name "{name}" cannot hold {ch!r} at column '
                                                       f'{column + offset}; {NAME_RULE}')
        part_start = False
    if part_start:
        raise TemplateError(text, column + len(name) - 1, f'the field name "{name}" ends with "."; {NAME_RULE}')


# --- rendering ---------------------------------------------------------------------------------------------------

def is_date_format(fmt: str) -> bool:
    """Whether ``fmt`` is a strftime format: a ``%`` before its last character (``.1%`` is a number's percent)."""
    return "%" in fmt[:-1]


def as_datetime(value: Any) -> datetime | date:
    """``value`` as a date (ValueError when it is not one): datetimes and dates as they are, epoch seconds in local
    time, EXIF (``2023:07:14 10:22:01``, with sub-seconds or an offset) and ISO 8601 strings parsed."""
    if isinstance(value, (datetime, date)):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(value)
        except (OverflowError, OSError, ValueError) as exc:
            raise ValueError(f"{value!r} is not a time in epoch seconds ({exc})") from None
    if isinstance(value, str):
        text = value.strip().rstrip("\0")  # EXIF strings often end in NUL padding
        if len(text) >= 10 and text[4] == ":" and text[7] == ":" and text[:4].isdigit():
            text = f"{text[:4]}-{text[5:7]}-{text[8:]}"  # EXIF's 2023:07:14 -> ISO's 2023-07-14
        try:
            return datetime.fromisoformat(text)
        except ValueError:
            raise ValueError(f"{value!r} is not a date") from None
    raise ValueError(f"a {type(value).__name__} is not a date")


def _format(value: Any, fmt: str | None) -> str:
    """``value`` as text under ``fmt`` (ValueError when it cannot take it)."""
    if fmt is None:
        return str(value)
    if is_date_format(fmt):
        try:
            return as_datetime(value).strftime(fmt)
        except (TypeError, UnicodeError) as exc:
            raise ValueError(str(exc)) from None
    try:
        return format(value, fmt)
    except (TypeError, ValueError) as exc:
        number = _number(value) if isinstance(value, str) else None
        if number is None:
            raise ValueError(str(exc)) from None
        try:
            return format(number, fmt)
        except (TypeError, ValueError):
            raise ValueError(str(exc)) from None


def _number(text: str) -> int | float | None:
    """``text`` read as an int or a float, or None."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return None


def _with(part: Placeholder, fallback: str) -> str:
    """``part`` written back with ``fallback``."""
    fmt = f":{part.format}" if part.format else ""
    return f"{{{part.name}{fmt}|{fallback}}}"


def _missing_message(text: str, part: Placeholder) -> str:
    return (f'the template "{text}" needs {part.name}, which this file does not have; give a fallback: '
            f"{_with(part, 'unknown')}")


def _format_message(text: str, part: Placeholder, value: Any, exc: ValueError) -> str:
    shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
    kind = type(value).__name__
    if is_date_format(part.format or ""):
        want = f"{part.format!r} is a date format, and a date is {DATE_FORMS}"
    else:
        want = f"{part.format!r} is a Python format spec ({exc})"
    return (f'the template "{text}" cannot format {part.name} with {part.format!r}: this file\'s value is a {kind} '
            f"({shown}); {want}; give a fallback for such files: {_with(part, 'unknown')}")
