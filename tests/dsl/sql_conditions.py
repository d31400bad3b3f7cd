"""Building conditions in the dsl.sql tests: ``C`` (one comparison), ``all_`` / ``any_`` / ``none_`` (groups), and
leaves SQL cannot decide alone (extracted text, similarity) or decides only in a context that knows the field
(labels)."""

from __future__ import annotations

from typing import Any

from dsl.conditions import Compare, Group, Not
import flows.classify.fields  # noqa: F401  (installs the classifier's fields: metadata producer, duplicates)
import flows.documents.conditions  # noqa: F401  (installs the text field)


def C(field: str, op: str, value: Any = None, arg: str | None = None) -> Compare:
    return Compare(field=field, op=op, value=value, arg=arg)


def all_(*c) -> Group:
    return Group(type="all", conditions=list(c))


def any_(*c) -> Group:
    return Group(type="any", conditions=list(c))


def none_(*c) -> Group:
    return Group(type="none", conditions=list(c))


TEXT_LEAF = C("text", "contains", "invoice")
LABEL_LEAF = C("label", "=", "receipt")
SIMILAR_LEAF = C("similarity", ">=", 0.4, arg="a beach")
OPAQUE = Not(condition=SIMILAR_LEAF)  # SQL neither decides nor narrows it (an entry without vectors passes)
