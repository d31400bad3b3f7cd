"""The store's side of condition evaluation: the contexts ``dsl.sql`` and ``dsl.evaluate`` need (entry columns,
set membership, metadata values, computed fields), bound to the store's tables.

Computed fields (``dsl.fields.FieldSpec.computed``, such as ``duplicates``) have no column: the capability that
fills them registers how to work them out with :func:`register_computed` (``flows.classify.fields`` registers
``duplicates``): an SQL expression correlated with the entries table for pushdown, and the same value for one entry
in Python, so the two agree.

Content fields (``text``, type ``content``) are read line by line in Python; the capability that fills them registers
with :func:`register_content` how to test one entry (the verdict and the first matching line) and, for pushdown, a
superset clause from its full-text index (``dsl.sql.Superset``): SQL narrows, Python decides.

Registered fields (``label``, ``similarity``: ``FieldSpec.registered``) are tested whole by what their capability
registers with :func:`register_field` (``flows.semantic.conditions``): a clause for a leaf (exact for ``label``, an
EXISTS over the entry's assigned labels; a superset for ``similarity``) and the verdict for one entry with what was
seen (the scores, the best chunk), which plan-explain shows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Generic, Mapping, TypeVar

from sqlalchemy import and_, exists, select, true
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ColumnElement

from dsl.conditions import Group
from store.entries import T
from store.models import MetadataValue
from store.sets import M, S

MV = MetadataValue.__table__


@dataclass(frozen=True)
class ComputedField:
    """How to work out one computed field.

    ``sql()``: (its value for the current row of the entries table ``store.entries.T``, the clause that says
    whether that row has a value); ``value(conn, entry)``: the same for one entry row, None where it has none.
    """

    name: str
    sql: Callable[[], tuple[ColumnElement[Any], ColumnElement[bool]]]
    value: Callable[[Connection, Mapping[str, Any]], Any]


F = TypeVar("F")


class _Registry(Generic[F]):
    """The registrations of one kind of field (computed, content) the installed capabilities make, by name."""

    def __init__(self, kind: str, is_kind: Callable[[Any], bool]) -> None:
        self.kind, self._is_kind = kind, is_kind
        self.entries: dict[str, F] = {}

    def register(self, field: F) -> F:
        """Register how ``field.name`` (a field of this kind in dsl.fields) is worked out; once per name."""
        from dsl.fields import field_spec

        if not self._is_kind(field_spec(field.name)):
            raise ValueError(f"field {field.name!r} is not a {self.kind} field of dsl.fields")
        if field.name in self.entries:
            raise ValueError(f"{self.kind} field {field.name!r} is registered twice")
        self.entries[field.name] = field
        return field

    def get(self, name: str) -> F:
        """The registration of ``name``, once the installed capabilities have registered theirs; FieldNotAvailable
        (naming the module that would fill it) when none has."""
        if name not in self.entries:
            from flows.capabilities import load_capabilities

            load_capabilities()
        try:
            return self.entries[name]
        except KeyError:
            from dsl.evaluate import not_available
            from dsl.fields import field_spec

            raise not_available(field_spec(name)) from None


_COMPUTED: _Registry[ComputedField] = _Registry("computed", lambda spec: spec.computed)
COMPUTED = _COMPUTED.entries
register_computed = _COMPUTED.register
computed_field = _COMPUTED.get


@dataclass(frozen=True)
class ContentField:
    """How to test one content field (``text``).

    ``prefilter(op, value, dialect)``: a clause over the entries table ``store.entries.T`` true for every entry
    whose content can satisfy ``op value`` (a superset; None: no narrowing); ``match(conn, entry, op, value)``:
    (verdict, what was seen) for one entry row, as ``dsl.evaluate.EvalContext.content`` describes.
    """

    name: str
    prefilter: Callable[[str, Any, str], ColumnElement[bool] | None]
    match: Callable[[Connection, Mapping[str, Any], str, Any], tuple[bool, Any]]


_CONTENT: _Registry[ContentField] = _Registry("content", lambda spec: spec.type == "content")
CONTENT = _CONTENT.entries
register_content = _CONTENT.register
content_field = _CONTENT.get


@dataclass(frozen=True)
class RegisteredField:
    """How to test one registered field (``dsl.fields.FieldSpec.registered``: ``label``, ``similarity``).

    ``clause(op, value, arg, dialect)``: a clause over the entries table ``store.entries.T``, exact for an "exact"
    field (never NULL), a superset for a "superset" one (None: no narrowing); ``match(conn, entry, op, value,
    arg)``: (verdict, what was seen) for one entry row, as ``dsl.evaluate.EvalContext.field`` describes.
    """

    name: str
    clause: Callable[[str, Any, str | None, str], ColumnElement[bool] | None]
    match: Callable[[Connection, Mapping[str, Any], str, Any, str | None], tuple[bool, Any]]


_REGISTERED: _Registry[RegisteredField] = _Registry("registered", lambda spec: spec.registered is not None)
REGISTERED = _REGISTERED.entries
register_field = _REGISTERED.register
registered_field = _REGISTERED.get


def split(cond) -> tuple[Any, Any]:
    """(the part of ``cond`` SQL can evaluate, the rest for Python); None for an empty side."""
    if cond is None:
        return None, None
    from dsl import sql as dsl_sql

    return dsl_sql.split(cond)


def both(a, b):
    """The conjunction of two residual conditions (either may be None)."""
    if a is None:
        return b
    if b is None:
        return a
    return Group(type="all", conditions=[a, b])


# --- which outcomes fill which fields (for plan-preview's notes) ------------------------------------------------

# outcome type -> (outcome, field spec) -> whether running that outcome fills the field
FILLERS: dict[str, Callable[[Any, Any], bool]] = {}


def register_filler(outcome_type: str, fills: Callable[[Any, Any], bool]) -> None:
    """Say which condition fields an outcome type fills (``fills(outcome, spec)``), so a preview can tell that a
    rule's condition depends on an outcome that runs earlier in the same plan."""
    FILLERS[outcome_type] = fills


def fills(outcome, spec) -> bool:
    """Whether running ``outcome`` (not its chained steps) fills the field ``spec``."""
    if not FILLERS:
        from flows.capabilities import load_capabilities

        load_capabilities()
    test = FILLERS.get(outcome.type)
    return bool(test and test(outcome, spec))


class SqlStore:
    """dsl.sql's context over the entries table."""

    def __init__(self, engine: Engine, *, now: float) -> None:
        self.now = now
        self.dialect = engine.dialect.name

    def column(self, field: str):
        return T.c[field]

    def member_of(self, set_names: list[str]):
        return exists().where(M.c.entry_id == T.c.id, M.c.set_id == S.c.id, S.c.name.in_(set_names))

    def metadata_exists(self, key: str, build):
        return exists().where(MV.c.entry_id == T.c.id, MV.c.key == key, build(MV.c.num_value, MV.c.text_value))

    def computed(self, name: str):
        return computed_field(name).sql()

    def content_prefilter(self, name: str, op: str, value: Any):
        return content_field(name).prefilter(op, value, self.dialect)

    def field_clause(self, name: str, op: str, value: Any, arg: str | None):
        return registered_field(name).clause(op, value, arg, self.dialect)

    def clause(self, cond):
        from dsl import sql as dsl_sql

        return true() if cond is None else dsl_sql.to_sql(cond, self)


class EvalStore:
    """dsl.evaluate's context: set membership and metadata looked up in the store (cached per run)."""

    def __init__(self, engine: Engine, *, now: float) -> None:
        self.engine = engine
        self.now = now
        self._members: dict[str, set[int]] = {}

    def member_of(self, entry, set_names: list[str]) -> bool:
        for name in set_names:
            if name not in self._members:
                with self.engine.connect() as conn:
                    self._members[name] = set(conn.execute(
                        select(M.c.entry_id).join(S, S.c.id == M.c.set_id).where(S.c.name == name)).scalars())
            if entry["id"] in self._members[name]:
                return True
        return False

    def metadata(self, entry, key: str) -> Any:
        with self.engine.connect() as conn:
            row = conn.execute(select(MV.c.num_value, MV.c.text_value)
                               .where(and_(MV.c.entry_id == entry["id"], MV.c.key == key))).first()
        if row is None:
            return None
        return row[0] if row[0] is not None else row[1]

    def computed(self, entry, name: str) -> Any:
        field = computed_field(name)
        with self.engine.connect() as conn:
            return field.value(conn, entry)

    def content(self, entry, name: str, op: str, value: Any) -> tuple[bool, Any]:
        field = content_field(name)
        with self.engine.connect() as conn:
            return field.match(conn, entry, op, value)

    def field(self, entry, name: str, op: str, value: Any, arg: str | None) -> tuple[bool, Any]:
        registration = registered_field(name)
        with self.engine.connect() as conn:
            return registration.match(conn, entry, op, value, arg)

    def evaluate(self, cond, entry) -> bool:
        from dsl import evaluate as dsl_eval

        return True if cond is None else dsl_eval.evaluate(cond, entry, self)

    def explain(self, cond, entry) -> dict:
        from dsl import evaluate as dsl_eval

        return dsl_eval.explain(cond, entry, self)
