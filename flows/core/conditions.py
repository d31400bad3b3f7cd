"""The store's side of condition evaluation: the contexts ``dsl.sql`` and ``dsl.evaluate`` need (entry columns,
set membership, metadata values, computed fields), bound to the store's tables, and the registries of how the fields
capabilities fill are worked out (plans, previews and searches evaluate conditions through them).

Computed fields (``dsl.fields.FieldSpec.computed``, such as ``duplicates``) have no column: the capability that
fills one declares how to work it out as a :class:`ComputedField` (``Capability.fields``; ``flows.classify.fields``
has ``duplicates``): an SQL expression correlated with the entries table for pushdown, and the same value for one
entry in Python, so the two agree.

Content fields (``text``, type ``content``) are read line by line in Python; the capability that fills them declares
as a :class:`ContentField` how to test one entry (the verdict and the first matching line) and, for pushdown, a
superset clause from its full-text index (``dsl.sql.Superset``): SQL narrows, Python decides.

Registered fields (``label``, ``similarity``: ``FieldSpec.registered``) are tested whole by what their capability
declares as a :class:`RegisteredField` (``flows.semantic.conditions``): a clause for a leaf (exact for ``label``, an
EXISTS over the entry's assigned labels; a superset for ``similarity``) and the verdict for one entry with what was
seen (the scores, the best chunk), which plan-explain shows.

Which outcome types fill which fields (:class:`Filler`, ``Capability.fillers``) lets a preview say that a rule's
condition depends on an outcome that runs earlier in the same plan.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Union

from sqlalchemy import and_, exists, select, true
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.sql.elements import ColumnElement

from dsl import evaluate as dsl_eval
from dsl import sql as dsl_sql
from dsl.conditions import Group
from dsl.fields import FieldSpec, field_spec
from flows.core.capability import Registry
from store.entries import T
from store.models import MetadataValue
from store.sets import M, S

MV = MetadataValue.__table__


def _kind_check(kind: str, is_kind: Callable[[FieldSpec], bool]) -> Callable[[str, Any], None]:
    def check(name: str, _field: Any) -> None:
        if not is_kind(field_spec(name)):
            raise ValueError(f"field {name!r} is not a {kind} field of dsl.fields")
    return check


def _lookup(registry: Registry[Any], name: str) -> Any:
    """The registration of ``name``, once the installed capabilities have registered theirs; FieldNotAvailable
    (naming the module that would fill it) when none has."""
    found = registry.get(name)
    if found is None:
        raise dsl_eval.not_available(field_spec(name))
    return found


@dataclass(frozen=True)
class ComputedField:
    """How to work out one computed field.

    ``sql()``: (its value for the current row of the entries table ``store.entries.T``, the clause that says
    whether that row has a value); ``value(conn, entry)``: the same for one entry row, None where it has none.
    """

    name: str
    sql: Callable[[], tuple[ColumnElement[Any], ColumnElement[bool]]]
    value: Callable[[Connection, Mapping[str, Any]], Any]


_COMPUTED: Registry[ComputedField] = Registry(
    "computed field", lambda capability: ((f.name, f) for f in capability.fields if isinstance(f, ComputedField)),
    check=_kind_check("computed", lambda spec: spec.computed))
COMPUTED = _COMPUTED.entries


def register_computed(field: ComputedField) -> ComputedField:
    return _COMPUTED.add(field.name, field)


def computed_field(name: str) -> ComputedField:
    return _lookup(_COMPUTED, name)


@dataclass(frozen=True)
class ContentField:
    """How to test one content field (``text``).

    ``prefilter(op, value, engine)``: a clause over the entries table ``store.entries.T`` true for every entry
    whose content can satisfy ``op value`` (a superset; None: no narrowing); ``match(conn, entry, op, value)``:
    (verdict, what was seen) for one entry row, as ``dsl.evaluate.EvalContext.content`` describes.
    """

    name: str
    prefilter: Callable[[str, Any, Engine], ColumnElement[bool] | None]
    match: Callable[[Connection, Mapping[str, Any], str, Any], tuple[bool, Any]]


_CONTENT: Registry[ContentField] = Registry(
    "content field", lambda capability: ((f.name, f) for f in capability.fields if isinstance(f, ContentField)),
    check=_kind_check("content", lambda spec: spec.type == "content"))
CONTENT = _CONTENT.entries


def register_content(field: ContentField) -> ContentField:
    return _CONTENT.add(field.name, field)


def content_field(name: str) -> ContentField:
    return _lookup(_CONTENT, name)


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


_REGISTERED: Registry[RegisteredField] = Registry(
    "registered field",
    lambda capability: ((f.name, f) for f in capability.fields if isinstance(f, RegisteredField)),
    check=_kind_check("registered", lambda spec: spec.registered is not None))
REGISTERED = _REGISTERED.entries


def register_field(field: RegisteredField) -> RegisteredField:
    return _REGISTERED.add(field.name, field)


def registered_field(name: str) -> RegisteredField:
    return _lookup(_REGISTERED, name)


FieldRegistration = Union[ComputedField, ContentField, RegisteredField]  # what Capability.fields holds


def split(cond) -> tuple[Any, Any]:
    """(the part of ``cond`` SQL can evaluate, the rest for Python); None for an empty side."""
    if cond is None:
        return None, None
    return dsl_sql.split(cond)


def both(a, b):
    """The conjunction of two residual conditions (either may be None)."""
    if a is None:
        return b
    if b is None:
        return a
    return Group(type="all", conditions=[a, b])


# --- which outcomes fill which fields (for plan-preview's notes) ------------------------------------------------


@dataclass(frozen=True)
class Filler:
    """Outcomes of type ``outcome_type`` fill the condition fields for which ``fills(outcome, spec)`` is true."""

    outcome_type: str
    fills: Callable[[Any, FieldSpec], bool]


_FILLERS: Registry[Filler] = Registry("filler of condition fields",
                                      lambda capability: ((f.outcome_type, f) for f in capability.fillers))
FILLERS = _FILLERS.entries  # outcome type -> its Filler


def register_filler(filler: Filler) -> Filler:
    """Say which condition fields an outcome type fills, so a preview can tell that a rule's condition depends on an
    outcome that runs earlier in the same plan (a capability declares its fillers instead)."""
    return _FILLERS.add(filler.outcome_type, filler)


def fills(outcome, spec) -> bool:
    """Whether running ``outcome`` (not its chained steps) fills the field ``spec``."""
    filler = _FILLERS.get(outcome.type)
    return bool(filler and filler.fills(outcome, spec))


class SqlStore:
    """dsl.sql's context over the entries table."""

    def __init__(self, engine: Engine, *, now: float) -> None:
        self.now = now
        self.engine = engine
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
        return content_field(name).prefilter(op, value, self.engine)

    def field_clause(self, name: str, op: str, value: Any, arg: str | None):
        return registered_field(name).clause(op, value, arg, self.dialect)

    def clause(self, cond):
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
        return True if cond is None else dsl_eval.evaluate(cond, entry, self)

    def explain(self, cond, entry) -> dict:
        return dsl_eval.explain(cond, entry, self)
