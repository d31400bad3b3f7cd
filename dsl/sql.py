"""Condition trees compiled to SQLAlchemy boolean clauses, for pushing the stored-field part of a plan into SQL.

The semantics are :mod:`dsl.evaluate`'s, leaf for leaf, and every leaf compiles to a two-valued boolean (never
NULL): a nullable column is tested ``col IS NOT NULL AND ...`` and metadata through ``EXISTS``, so ``not`` and
``none`` give the same answer in SQL as in Python. Values are always bound parameters and column names come from the
field registry, never from the plan text. Tables come from a :class:`SqlContext`, so ``dsl`` needs nothing of
``store``.

Backends: SQLite (``regexp_match`` is the store's REGEXP function, RE2's search, so ``matches`` is exactly
:mod:`dsl.evaluate`'s) and PostgreSQL (``~``: an ARE regular expression, which agrees with RE2 for ordinary patterns;
patterns are checked with RE2 when the condition is built, and PostgreSQL runs them under its statement time limit;
globs are translated to the subset both read alike). ``contains`` / ``startswith`` / ``endswith`` are LIKE with ``%`` and ``_`` escaped; they are
case-sensitive on SQLite because the store's engine sets ``PRAGMA case_sensitive_like``.
"""

from __future__ import annotations

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


def can_push(leaf: Compare) -> bool:
    """Whether SQL can test the leaf: entries columns, set membership, metadata and computed fields; not text, label,
    similarity."""
    return pushable_spec(field_spec(leaf.field))


def can_push_tree(cond: Any) -> bool:
    return all(can_push(leaf) for leaf in iter_leaves(cond))


def split(cond: Any) -> tuple[Any | None, Any | None]:
    """(the part for SQL, the residual for Python); None stands for "nothing to test" (true).

    A top-level ``all`` (with the ``all`` groups nested directly in it) is split child by child; any other node goes
    wholly to SQL when all its leaves can be pushed, else wholly to Python.
    """
    if isinstance(cond, Group) and cond.type == "all":
        pushed, rest = [], []
        for child in _all_children(cond):
            (pushed if can_push_tree(child) else rest).append(child)
        if not rest:
            return cond, None
        return _conjunction(pushed), _conjunction(rest)
    return (cond, None) if can_push_tree(cond) else (None, cond)


def _all_children(group: Group):
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


def _typed(op: str, value: Any, num, text, kind: str, dialect: str) -> Clause:
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
        return getattr(col, op)(value, autoescape=True)
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
