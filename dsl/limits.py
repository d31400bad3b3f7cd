"""Limits on plan input, so that no text or object a caller sends can exhaust the parser (Python's recursion limit,
its 4,300-digit integer limit) or reach the store as a value it cannot bind. Each is reported as a located plan
error, and the README lists them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

MAX_TEXT = 1_000_000  # characters of plan text (DSL, YAML or JSON) or of one condition expression
MAX_DEPTH = 64  # nesting of a condition: parentheses, lists, all()/any()/none() and chains of not
MAX_OBJECT_DEPTH = 2 * MAX_DEPTH + 16  # mappings and lists in a YAML / JSON plan or a plan object ({all: [...]} is 2)
MAX_NUMBER = 100  # characters of one number in plan text
MAX_INT = 2**63 - 1  # the largest integer the store can hold (SQLite and PostgreSQL BIGINT)

TEXT_RULE = f"plan text and expressions are at most {MAX_TEXT:,} characters long"
DEPTH_RULE = (f"conditions nest at most {MAX_DEPTH} levels deep (parentheses, lists, all()/any()/none() and "
              "'not' each add one)")
OBJECT_DEPTH_RULE = f"a plan object nests at most {MAX_OBJECT_DEPTH} levels of mappings and lists"
NUMBER_RULE = f"a number is at most {MAX_NUMBER} characters long"
INT_RULE = f"whole numbers lie between -{MAX_INT} and {MAX_INT}"


def object_too_deep(data: Any) -> tuple[Any, ...] | None:
    """The path to the first place where ``data`` (parsed YAML / JSON) nests deeper than :data:`MAX_OBJECT_DEPTH`,
    or None; walks without recursion, so any depth can be checked."""
    stack: list[tuple[Any, tuple[Any, ...]]] = [(data, ())]
    while stack:
        node, path = stack.pop()
        items: Iterable[tuple[Any, Any]]
        if isinstance(node, dict):
            items = node.items()
        elif isinstance(node, (list, tuple)):
            items = enumerate(node)
        else:
            continue
        if len(path) >= MAX_OBJECT_DEPTH:
            return path
        for key, child in items:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, (*path, key)))
    return None


def check_int(value: int, what: str) -> int:
    """``value`` when the store can hold it, else ValueError naming ``what``."""
    if not -MAX_INT <= value <= MAX_INT:
        raise ValueError(f"{what} {_short(value)} is out of range; {INT_RULE}")
    return value


def _short(value: Any) -> str:
    if isinstance(value, int) and abs(value) >= 10**40:  # str() of a huge int is itself refused past 4,300 digits
        return f"of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = str(value)
    return text if len(text) <= 40 else text[:37] + "..."
