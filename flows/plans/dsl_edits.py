"""DSL plan files edited statement by statement: the statements whose printed form changed are rewritten, new ones
go after the statement before them in the printer's order, removed ones are deleted; comments, blank lines and the
layout of every other statement stay. Used by :func:`flows.plans.file_edits.edit_plan_text`.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import cast

from lark import Token, Tree

from dsl.grammar import PARSER
from dsl.model import Plan
from dsl.printer import plan_to_dsl

__all__ = ["Unsupported", "edit_dsl"]


class Unsupported(Exception):
    """The file's shape is one that is not edited in place (the caller writes the plan whole)."""


@dataclass
class _Statement:
    key: tuple[str, ...]
    start: int  # line indexes (from 0) of its first and last line
    end: int
    head_end: int = -1  # a rule: the last line of ``rule NAME when ...``
    dos: list[tuple[int, int]] = field(default_factory=list)  # a rule: the first and last line of each do line


def _lines(node: Tree[Token] | Token | None) -> tuple[int, int]:
    """The first and last line (from 1) of a parse tree node, as Lark gives them (a statement's last line is the
    one after its newline)."""
    if isinstance(node, Tree):
        return node.meta.line, node.meta.end_line
    if isinstance(node, Token):
        return cast(int, node.line), cast(int, node.end_line)
    raise Unsupported("a statement without a position")


def _statements(text: str, plan: Plan) -> list[_Statement]:
    """The top-level statements of DSL ``text`` (whose plan is ``plan``) with their lines, keyed like
    :func:`_units`."""
    tree = PARSER.parse(text if text.endswith("\n") else text + "\n", start="plan")
    first, last = _lines(tree.children[0])
    found = [_Statement(("plan",), first - 1, last - 1)]
    sources, rules = iter(plan.sources), iter(plan.rules)
    for node in tree.children[1:]:
        if not isinstance(node, Tree):
            raise Unsupported(f"unexpected {node!r} in the plan's parse tree")
        kind = str(node.data)
        key = (kind, next(sources).name) if kind == "source" else (kind, next(rules).name) if kind == "rule" \
            else (kind,)
        first, last = _lines(node)
        statement = _Statement(key, first - 1, last - 2)
        if kind == "rule":
            name, condition = node.children[0], node.children[1]
            statement.head_end = _lines(condition if condition is not None else name)[1] - 1
            statement.dos = [(_lines(d)[0] - 1, _lines(d)[1] - 2) for d in node.children[2:]]
        found.append(statement)
    return found


def _units(plan: Plan, stated: Collection[tuple[str, ...]] = ()) -> dict[tuple[str, ...], list[str]]:
    """Each statement of ``plan`` as the printer writes it, by key (``("rule", name)``): its line, and for a rule
    its do lines after it (without their indentation); the mode and status in ``stated`` also when they are the
    defaults."""
    units: dict[tuple[str, ...], list[str]] = {}
    sources, rules = iter(plan.sources), iter(plan.rules)
    key: tuple[str, ...] = ()
    for line in plan_to_dsl(plan).splitlines():
        if line.startswith(" "):
            units[key].append(line.strip())
            continue
        kind = line.split(" ", 1)[0]
        key = (kind, next(sources).name) if kind == "source" else (kind, next(rules).name) if kind == "rule" \
            else (kind,)
        units[key] = [line]
    for key in (("mode",), ("status",)):
        if key in stated and key not in units:
            units[key] = [f"{key[0]} {getattr(plan, key[0])}"]
    return units


def _comment_at(line: str) -> int | None:
    """Where the ``#`` comment of a DSL line starts (outside quoted text), or None."""
    quote, i = "", 0
    while i < len(line):
        char = line[i]
        if quote and char == "\\":
            i += 1
        elif quote and char == quote:
            quote = ""
        elif not quote and char in "\"'":
            quote = char
        elif not quote and char == "#":
            return i
        i += 1
    return None


def _relined(statement: str, first: str, last: str) -> str:
    """``statement`` written where ``first``..``last`` were: with the first line's indentation and the last line's
    comment (at its column when there is room)."""
    line = first[:len(first) - len(first.lstrip())] + statement.strip()
    at = _comment_at(last)
    if at is None:
        return line
    return line.ljust(at) + last[at:] if len(line) < at else f"{line}  {last[at:]}"


def _indent(line: str) -> str:
    return line[:len(line) - len(line.lstrip())]


def edit_dsl(text: str, old: Plan, new: Plan) -> str | None:
    """DSL ``text`` (whose plan is ``old``) changed to say ``new``; None when its statements do not map one to one
    onto the printer's."""
    lines = text.split("\n")
    statements = _statements(text, old)
    where = {s.key: s for s in statements}
    defaults = [key for key in where if key not in _units(old)]  # ``status active``: kept while it stays so
    was, now = _units(old, defaults), _units(new, defaults)
    if len(where) != len(statements) or set(where) != set(was):
        return None  # a statement given twice: the file is not in a shape this module edits
    do_indent = next((_indent(lines[s.dos[0][0]]) for s in statements if s.dos), "  ")
    replaced: list[tuple[int, int, list[str]]] = []
    inserted: dict[int, list[str]] = {}
    for s in statements:
        if s.key not in now:
            replaced.append((s.start, s.end + 1, []))
        elif was[s.key] != now[s.key] and s.key[0] == "rule":
            _rule_edits(lines, s, was[s.key], now[s.key], do_indent, replaced, inserted)
        elif was[s.key] != now[s.key]:
            replaced.append((s.start, s.end + 1, [_relined(now[s.key][0], lines[s.start], lines[s.end])]))
    anchor = where[("plan",)]
    for key, unit in now.items():  # new statements go after the one before them in the printer's order
        if key in where:
            anchor = where[key]
            continue
        at = anchor.end + 1
        gap = key[0] == "rule" and at + 1 < len(lines) and not lines[at].strip()
        inserted.setdefault(at, []).extend([""] * gap + [unit[0]] + [do_indent + d for d in unit[1:]])
    edits = replaced + [(at, at, added) for at, added in inserted.items()]
    for start, end, added in sorted(edits, key=lambda e: (e[0], e[1]), reverse=True):
        lines[start:end] = added
    return "\n".join(lines)


def _rule_edits(lines: list[str], s: _Statement, was: list[str], now: list[str], do_indent: str,
                replaced: list[tuple[int, int, list[str]]], inserted: dict[int, list[str]]) -> None:
    """The edits of one rule: its head line, and its do lines matched in order."""
    if len(was) - 1 != len(s.dos):
        raise Unsupported(f"rule {s.key[1]}: its do lines do not match its outcomes")
    if was[0] != now[0]:
        replaced.append((s.start, s.head_end + 1, [_relined(now[0], lines[s.start], lines[s.head_end])]))
    indent = _indent(lines[s.dos[0][0]]) if s.dos else do_indent
    old_dos, new_dos = was[1:], now[1:]
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old_dos, new_dos, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and i2 - i1 == j2 - j1:
            for i, j in zip(range(i1, i2), range(j1, j2)):
                first, last = s.dos[i]
                replaced.append((first, last + 1, [_relined(new_dos[j], lines[first], lines[last])]))
            continue
        for i in range(i1, i2):
            replaced.append((s.dos[i][0], s.dos[i][1] + 1, []))
        if j2 > j1:
            at = s.dos[i1 - 1][1] + 1 if i1 > 0 else s.head_end + 1
            inserted.setdefault(at, []).extend(indent + d for d in new_dos[j1:j2])
