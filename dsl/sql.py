"""Condition trees compiled to SQLAlchemy boolean clauses, for pushing the stored-field part of a plan into SQL.

The semantics are :mod:`dsl.evaluate`'s, leaf for leaf, and every leaf compiles to a two-valued boolean (never
NULL): a nullable column is tested ``col IS NOT NULL AND ...`` and metadata through ``EXISTS``, so ``not`` and
``none`` give the same answer in SQL as in Python. Values are always bound parameters and column names come from the
field registry, never from the plan text. Tables come from a :class:`SqlContext`, so ``dsl`` needs nothing of
``store``.

Backends: SQLite (``regexp_match`` is the store's REGEXP function, RE2's search, so ``matches`` is exactly
:mod:`dsl.evaluate`'s) and PostgreSQL (``~``: an ARE regular expression, which agrees with RE2 for ordinary patterns;
patterns are checked with RE2 when the condition is built, and PostgreSQL runs them under its statement time limit;
globs are translated to the subset both read alike). ``contains`` / ``startswith`` / ``endswith`` are LIKE with ``%``
and ``_`` escaped; they are case-sensitive on SQLite because the store's engine sets ``PRAGMA case_sensitive_like``.

Registered fields (``dsl.fields.FieldSpec.registered``) compile through the context's :meth:`SqlContext.field_clause`:
``label = invoice`` exactly (an EXISTS over the entry's assigned labels), ``similarity("a phrase") > 0.4`` only as a
superset (entries that have chunk vectors), like content leaves below.

Content leaves (``text contains "invoice"``, ``text matches "INV-\\d{6}"``) are not decidable in SQL: the exact test
reads the entry's lines in Python. But a full-text index can say which entries *may* match, so :func:`split` keeps
such a leaf in the Python residual and also puts a :class:`Superset` of it in the SQL part: a clause true for every
entry the leaf could be true for (:meth:`SqlContext.content_prefilter`, e.g. "its text holds the trigrams of
``invoice``"), which narrows the rows Python reads without changing the answer. :func:`content_literals` says which
substrings every line the leaf accepts must contain; a context without ``content_prefilter`` narrows nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from collections.abc import Iterator
from typing import Any, Callable, Protocol

from sqlalchemy import Float, and_, false, func, literal, not_, or_, true
from sqlalchemy.sql.elements import ColumnElement

from dsl.nodes import Compare, Group, Not, iter_leaves
from dsl.evaluate import (TEXT_ONLY_OPS, glob_regex, is_number, not_available, pushable_spec, time_tests,
                           value_kind)
from dsl.fields import field_spec

Clause = ColumnElement[bool]


class SqlContext(Protocol):
    now: float
    dialect: str  # sqlite | postgresql | ...

    def column(self, name: str) -> ColumnElement[Any]:
        """The entries column ``name`` (a name from the field registry)."""

    def member_of(self, set_names: list[str]) -> Clause:
        """True when the current entry is in any of the named sets (an EXISTS: never NULL)."""

    def metadata_exists(self, key: str, build: Callable[[ColumnElement[Any], ColumnElement[Any]], Clause]) -> Clause:
        """EXISTS a metadata row of the current entry under ``key`` whose (num_value, text_value) satisfy ``build``."""

    def computed(self, name: str) -> tuple[ColumnElement[Any], Clause]:
        """The computed field ``name`` (``FieldSpec.computed``) for the current entry: (its value, usually a scalar
        subquery correlated with the entries table; whether the entry has a value, a cheap test that guards it)."""

    def content_prefilter(self, name: str, op: str, value: Any) -> Clause | None:
        """A clause true for every entry whose content field ``name`` can satisfy ``op value`` (a superset: it may
        be true for entries the exact test rejects, never false for one it accepts); None: no narrowing. Optional:
        for a context without it, content leaves narrow nothing."""

    def field_clause(self, name: str, op: str, value: Any, arg: str | None) -> Clause | None:
        """A leaf on the registered field ``name`` (``FieldSpec.registered``): for an "exact" one (``label``) the
        clause that decides it (an EXISTS: never NULL); for a "superset" one (``similarity``) a clause true for
        every entry that may satisfy it (None: no narrowing). Optional: without it, exact registered fields cannot
        be pushed (FieldNotAvailable) and superset ones narrow nothing."""


@dataclass(frozen=True)
class Superset:
    """Part of the SQL side of :func:`split`: a clause true for every entry ``condition`` is true for (and maybe for
    more). ``condition`` itself stays in the residual, which decides; this only narrows the rows read for it."""

    condition: Any


def can_push(leaf: Compare) -> bool:
    """Whether SQL can test the leaf: entries columns, set membership, metadata, computed fields and label (an
    EXISTS over its rows); not text or similarity (SQL narrows those: :func:`narrows`)."""
    return pushable_spec(field_spec(leaf.field))


def can_push_tree(cond: Any) -> bool:
    return all(can_push(leaf) for leaf in iter_leaves(cond))


def split(cond: Any) -> tuple[Any | None, Any | None]:
    """(the part for SQL, the residual for Python); None stands for "nothing to test" (true).

    A top-level ``all`` (with the ``all`` groups nested directly in it) is split child by child; any other node goes
    wholly to SQL when all its leaves can be pushed, else wholly to Python. When a part that goes to Python holds
    content leaves SQL can narrow for (:func:`narrows`), the SQL part is a :class:`Superset`: the pushed children
    (exact) and a superset of those parts, e.g. ``all(size > 1MB, text contains "x")`` gives
    (``Superset(all(size > 1MB, text contains "x"))``, ``text contains "x"``).
    """
    if isinstance(cond, Group) and cond.type == "all":
        pushed, rest, narrowing = [], [], []
        for child in _all_children(cond):
            if can_push_tree(child):
                pushed.append(child)
            else:
                rest.append(child)
                if narrows(child):
                    narrowing.append(child)
        if not rest:
            return cond, None
        sql_part = Superset(_conjunction(pushed + narrowing)) if narrowing else _conjunction(pushed)
        return sql_part, _conjunction(rest)
    if can_push_tree(cond):
        return cond, None
    return (Superset(cond) if narrows(cond) else None), cond


def narrows(cond: Any) -> bool:
    """Whether SQL can give a useful superset of a condition it cannot decide: a content leaf (its full-text
    prefilter), an ``all`` with such a child, an ``any`` whose every child is pushable or narrows. Negations
    (``not``, ``none``) of what SQL cannot decide give no superset (an entry without text satisfies
    ``not (text contains x)``)."""
    if isinstance(cond, Compare):
        spec = field_spec(cond.field)
        return spec.type == "content" or spec.registered == "superset"
    if isinstance(cond, Group) and cond.type == "all":
        return any(narrows(child) for child in cond.conditions)
    if isinstance(cond, Group) and cond.type == "any":
        return bool(cond.conditions) and all(can_push_tree(c) or narrows(c) for c in cond.conditions) \
            and not can_push_tree(cond)
    return False


def superset_sql(cond: Any, ctx: SqlContext) -> Clause:
    """A clause true for every entry ``cond`` is true for: exact where SQL can decide, the context's content
    prefilter for content leaves, true where nothing narrows."""
    if can_push_tree(cond):
        return to_sql(cond, ctx)
    if isinstance(cond, Compare):
        spec = field_spec(cond.field)
        clause = None
        if spec.type == "content" and getattr(ctx, "content_prefilter", None) is not None:
            clause = ctx.content_prefilter(cond.field, cond.op, cond.value)
        elif spec.registered == "superset" and getattr(ctx, "field_clause", None) is not None:
            clause = ctx.field_clause(cond.field, cond.op, cond.value, cond.arg)
        return true() if clause is None else clause
    if isinstance(cond, Group) and cond.type == "all":
        return and_(*(superset_sql(child, ctx) for child in cond.conditions))
    if isinstance(cond, Group) and cond.type == "any":
        return or_(*(superset_sql(child, ctx) for child in cond.conditions))
    return true()


def _all_children(group: Group) -> Iterator[Any]:
    for child in group.conditions:
        if isinstance(child, Group) and child.type == "all":
            yield from _all_children(child)
        else:
            yield child


def _conjunction(children: list[Any]) -> Any | None:
    if not children:
        return None
    return children[0] if len(children) == 1 else Group(type="all", conditions=children)


def to_sql(cond: Any, ctx: SqlContext) -> Clause:
    """The condition as a WHERE clause over the entries table; raises for fields SQL cannot test (see split)."""
    if isinstance(cond, Compare):
        return _leaf(cond, ctx)
    if isinstance(cond, Superset):
        return superset_sql(cond.condition, ctx)
    if isinstance(cond, Not):
        return not_(to_sql(cond.condition, ctx))
    if isinstance(cond, Group):
        parts = [to_sql(child, ctx) for child in cond.conditions]
        if cond.type == "all":
            return and_(*parts) if parts else true()
        if cond.type == "any":
            return or_(*parts) if parts else false()
        return not_(or_(*parts)) if parts else true()
    raise TypeError(f"not a condition: {cond!r}")


def _leaf(leaf: Compare, ctx: SqlContext) -> Clause:
    spec = field_spec(leaf.field)
    op, value = leaf.op, leaf.value
    if spec.type == "set":
        member = ctx.member_of(value if op == "in" else [value])
        return not_(member) if op == "!=" else member
    if op == "!=":  # "not equal" is exactly "not (equal)": true for an entry without the value
        return not_(_leaf(leaf.model_copy(update={"op": "="}), ctx))
    if spec.metadata_key is not None:
        return ctx.metadata_exists(spec.metadata_key,
                                   lambda num, text: metadata_clause(op, value, num, text, ctx.dialect))
    if spec.registered == "exact":
        field_clause = getattr(ctx, "field_clause", None)
        clause: Clause | None = None if field_clause is None else field_clause(spec.name, op, value, leaf.arg)
        if clause is None:
            raise not_available(spec)
        return clause
    if spec.computed:
        value_sql, present = ctx.computed(spec.name)
        return and_(present, value_clause(value_sql, op, value, value_kind(spec), ctx.dialect))
    if spec.column is None:
        raise not_available(spec)
    col = ctx.column(spec.column)
    if spec.name == "media_type":  # an extension of no known kind is "other"
        col = func.coalesce(col, literal("other"))
    if spec.type == "time":
        tests, negate = time_tests(op, value, ctx.now)
        clause = and_(*(_compare(col, o, t) for o, t in tests))
        clause = not_(clause) if negate else clause
    else:
        clause = value_clause(col, op, value, value_kind(spec), ctx.dialect)
    if getattr(col, "nullable", True):
        clause = and_(col.is_not(None), clause)
    return clause


def metadata_clause(op: str, value: Any, num: ColumnElement[Any], text: ColumnElement[Any], dialect: str) -> Clause:
    """:func:`dsl.evaluate.metadata_match` in SQL: a number when num_value is set, else text_value."""
    if op in TEXT_ONLY_OPS:
        return _typed(op, str(value), num, text, "text", dialect)
    if op == "in":
        numbers = [v for v in value if is_number(v)]
        texts = [v for v in value if not is_number(v)]
        parts = ([_typed("in", numbers, num, text, "number", dialect)] if numbers else []) + \
                ([_typed("in", texts, num, text, "text", dialect)] if texts else [])
        return or_(*parts)
    if op == "between":
        return and_(metadata_clause(">=", value[0], num, text, dialect),
                    metadata_clause("<=", value[1], num, text, dialect))
    return _typed(op, value, num, text, "number" if is_number(value) else "text", dialect)


def _typed(op: str, value: Any, num: ColumnElement[Any], text: ColumnElement[Any], kind: str, dialect: str) -> Clause:
    if kind == "number":
        return and_(num.is_not(None), value_clause(num, op, value, "number", dialect))
    return and_(num.is_(None), text.is_not(None), value_clause(text, op, value, "text", dialect))


def value_clause(col: ColumnElement[Any], op: str, value: Any, kind: str, dialect: str) -> Clause:
    """``col op value`` for a column known not to be NULL; ``kind`` (number | text) is what ``col`` holds."""
    if kind == "number":
        value = [_number(v) for v in value] if isinstance(value, list) else _number(value)
    if op == "in":
        return col.in_(list(value))
    if op in ("contains", "startswith", "endswith"):
        like: Clause = getattr(col, op)(value, autoescape=True)
        return like
    if op == "matches":
        return col.regexp_match(value)
    if op == "glob":
        regex = glob_regex(value)
        return false() if regex is None else col.regexp_match(regex)
    if kind == "text" and dialect == "postgresql" and op not in ("=", "!="):
        col = col.collate("C")  # order text by code point, as Python (and SQLite's BINARY collation) do
    if op == "between":
        return and_(_compare(col, ">=", value[0]), _compare(col, "<=", value[1]))
    return _compare(col, op, value)


def _number(value: Any) -> Any:
    """A fraction bound as a double, not with the type of the column it meets: PostgreSQL would round 1.5 to 2
    when it binds it as an integer (``count(*) IN (0, 1.5)`` matched a count of 2)."""
    if isinstance(value, float) and not value.is_integer():
        return literal(value, Float())
    return value


def _compare(col: ColumnElement[Any], op: str, value: Any) -> Clause:
    return {"=": col.__eq__, "!=": col.__ne__, "<": col.__lt__, "<=": col.__le__, ">": col.__gt__,
            ">=": col.__ge__}[op](value)


# --- what a content leaf needs of a line (for the full-text prefilter) --------------------------------------------


def content_literals(op: str, value: Any) -> list[str]:
    """Strings that every line satisfying a content leaf ``op value`` contains, exactly or, for a case-insensitive
    regex, up to ASCII case (such strings are returned in lower case); an empty list: none known. Either way the
    fold (``str.lower``) of every matching line contains the fold of each.

    ``contains``: the value itself. ``matches``: the literal runs a regular expression requires, read
    conservatively by :func:`regex_literals`.
    """
    if op == "contains":
        return [str(value)] if str(value) else []
    if op == "matches":
        return regex_literals(str(value))
    return []


_CLASS_ESCAPES = set("dDwWsSbBAz")  # classes and zero-width assertions: atoms that are no literal
_REPEAT = re.compile(r"\{\d+(,\d*)?\}")
_IGNORE_CASE = "(?i)"


class _NoLiterals(Exception):
    """A construct :func:`regex_literals` does not read: it gives no literals rather than guess."""


def regex_literals(pattern: str) -> list[str]:
    """The literal runs that every match of ``pattern`` (RE2 syntax, already checked) contains, or [] when the
    pattern is not a plain sequence this reader is sure of.

    Conservative by design: a run is a sequence of literal characters at the top level, outside any group, class or
    quantified atom (a character followed by ``*``, ``+``, ``?`` or ``{n,m}`` leaves its run); a top-level ``|``,
    flags other than a leading ``(?i)``, ``\\Q...\\E``, ``\\x..``, ``\\p..`` and any escape it does not know
    give no literals. Groups and classes are skipped whole (they only end a run). ``INV-\\d{6}`` gives
    ``["INV-"]``; ``report_\\d+\\.pdf`` gives ``["report_", ".pdf"]``.

    A pattern that starts with ``(?i)`` (case-insensitive as a whole) gives its runs in lower case, made only of
    ASCII characters other than ``s`` / ``S``: RE2 matches a letter by its Unicode case orbit, and for ASCII letters
    every member of the orbit lowers to the letter (K, k and the Kelvin sign all give k) except the long s, which
    matches ``s`` but lowers to itself. So the fold of every match contains each run: ``(?i)Invoice`` gives
    ``["invoice"]``.
    """
    ignore_case = pattern.startswith(_IGNORE_CASE)
    try:
        return _literal_runs(pattern[len(_IGNORE_CASE):] if ignore_case else pattern, ignore_case=ignore_case)
    except _NoLiterals:
        return []


def _caseless(ch: str) -> bool:
    """Whether every character RE2's case-insensitive matching takes for ``ch`` lowers to ``ch.lower()``."""
    return ord(ch) < 128 and ch not in "sS"


def _literal_runs(pattern: str, *, ignore_case: bool = False) -> list[str]:
    runs: list[str] = []
    run: list[str] = []
    i, n = 0, len(pattern)

    def end_run() -> None:
        if run:
            runs.append("".join(run))
            run.clear()

    while i < n:
        ch = pattern[i]
        literal: str | None = None
        if ch == "|":
            raise _NoLiterals  # an alternation at the top level: no run is required by every branch
        if ch in "^$":
            end_run()
            i += 1
            continue
        if ch == "\\":
            nxt = pattern[i + 1] if i + 1 < n else ""
            if nxt and ord(nxt) < 128 and not nxt.isalnum():
                literal = nxt
            elif nxt in _CLASS_ESCAPES and nxt:
                literal = None
            else:
                raise _NoLiterals  # \Q..\E, \x41, \pL, \n, octal...: not read here
            i += 2
        elif ch == "(":
            i = _skip_group(pattern, i)
        elif ch == "[":
            i = _skip_class(pattern, i)
        elif ch in "{}]" or ch == ".":
            if ch == "{":
                raise _NoLiterals  # a brace that is no repetition after an atom: RE2 reads it literally; not here
            i += 1
        elif ch in "*+?":
            raise _NoLiterals  # a quantifier with nothing before it (RE2 refuses it anyway)
        else:
            literal = ch
            i += 1
        quantified = False
        while i < n:
            if pattern[i] in "*+?":
                quantified = True
                i += 1
            elif pattern[i] == "{":
                found = _REPEAT.match(pattern, i)
                if found is None:
                    raise _NoLiterals
                quantified = True
                i = found.end()
            else:
                break
        if literal is not None and not quantified and (not ignore_case or _caseless(literal)):
            run.append(literal.lower() if ignore_case else literal)
        else:
            end_run()
    end_run()
    return runs


def _skip_group(pattern: str, i: int) -> int:
    """The index after the group opening at ``i``; flag groups (``(?i)``, ``(?s:...)``) give no literals."""
    if pattern.startswith("(?", i) and not (pattern.startswith("(?:", i) or pattern.startswith("(?P<", i)
                                            or pattern.startswith("(?<", i)):
        raise _NoLiterals
    depth, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "\\":
            i += 2
            continue
        if ch == "[":
            i = _skip_class(pattern, i)
            continue
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise _NoLiterals


def _skip_class(pattern: str, i: int) -> int:
    """The index after the class opening at ``i`` (``]`` first in the class is a member; ``[:alpha:]`` inside a
    class is not read here)."""
    n = len(pattern)
    j = i + 1
    if j < n and pattern[j] == "^":
        j += 1
    if j < n and pattern[j] == "]":
        j += 1
    while j < n:
        ch = pattern[j]
        if ch == "\\":
            j += 2
            continue
        if pattern.startswith("[:", j):
            raise _NoLiterals
        if ch == "]":
            return j + 1
        j += 1
    raise _NoLiterals
