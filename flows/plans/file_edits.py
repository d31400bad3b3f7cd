"""Plan files edited in place: when a plan that came from a file changes, only what changed is rewritten.

:func:`edit_plan_text` takes the file's text and the new plan and returns the new text. Comments, key order and
layout elsewhere are kept: YAML through ruamel.yaml's round-trip tree, JSON in the file's key order and indentation,
the DSL statement by statement. Lists of sources and rules are matched by name, so an edited rule keeps the comments
around it. It returns None when the old text is not a plan in that format, or when the edited text would not read
back as the new plan; the caller then prints the plan whole.
"""

from __future__ import annotations

import copy
import difflib
import io
import itertools
import json
import logging
import re
from collections.abc import Callable
from typing import Any

import yaml as pyyaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import CommentMark
from ruamel.yaml.scalarstring import DoubleQuotedScalarString, LiteralScalarString, ScalarString
from ruamel.yaml.tokens import CommentToken
from ruamel.yaml.util import load_yaml_guess_indent

from dsl.errors import PlanError
from dsl.model import Plan
from dsl.parse import parse_plan_text
from dsl.printer import plan_object, plan_to_yaml
from flows.plans.dsl_edits import Unsupported, edit_dsl

__all__ = ["edit_plan_text"]

log = logging.getLogger(__name__)

_MISSING: Any = object()
# where an edit descends into the file's tree (list positions as "*"); any other changed value is replaced whole
_DESCEND = {(): "map", ("sources",): "named", ("sources", "*"): "map", ("sources", "*", "config"): "map",
            ("rules",): "named", ("rules", "*"): "map", ("rules", "*", "outcomes"): "list", ("preferences",): "map",
            ("outcomes",): "list"}
# keys a file may spell another way (the model accepts both)
_ALIASES = {"when": ("conditions", "condition"), "path": ("paths",), "paths": ("path",)}


def edit_plan_text(text: str, plan: Plan, format: str) -> str | None:
    """``plan`` written over ``text``, a plan file in ``format`` (yaml, json or dsl), changing only what changed;
    None when that cannot be done faithfully."""
    try:
        old = parse_plan_text(text, format=format)
    except PlanError:
        return None
    if old == plan:
        return text
    edit = {"yaml": _edit_yaml, "json": _edit_json, "dsl": edit_dsl}[format]
    crlf = "\r\n" in text  # edited with plain line ends, written back with the file's
    try:
        edited = edit(text.replace("\r\n", "\n") if crlf else text, old, plan)
    except Unsupported as exc:
        log.info("plan %s: its file is written whole (%s)", plan.name, exc)
        return None
    except Exception:  # a plan update must not fail because its file could not be edited in place
        log.warning("plan %s: its file could not be edited in place; writing it whole", plan.name, exc_info=True)
        return None
    if edited is None:
        return None
    try:
        again = parse_plan_text(edited, format=format)
    except PlanError:
        again = None
    if again != plan:
        log.warning("plan %s: editing its file in place would change the plan; writing it whole", plan.name)
        return None
    return edited.replace("\n", "\r\n") if crlf else edited


# --- the merge: the change from one plan object to another, applied to the file's tree ---------------------------


def _distance(a: Any, b: Any) -> int:
    """How many values differ between two plan objects (a missing key counts one)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return sum(_distance(a[k], b[k]) if k in a and k in b else 1 for k in a.keys() | b.keys())
    if isinstance(a, list) and isinstance(b, list):
        return sum(_distance(x, y) for x, y in zip(a, b)) + abs(len(a) - len(b))
    return 0 if a == b else 1


def _file_key(node: dict, key: str) -> str | None:
    for candidate in (key, *_ALIASES.get(key, ())):
        if candidate in node:
            return candidate
    return None


def _names(items: list) -> list[Any]:
    return [item.get("name") if isinstance(item, dict) else None for item in items]


def _shorthand(plan: dict) -> tuple[Any, dict]:
    """The name of a plan object's first rule, and the object with that rule as the reference's conditions +
    outcomes (as a file may give it)."""
    rules = list(plan.get("rules") or [])
    main = rules.pop(0) if rules else {}
    data = {k: v for k, v in plan.items() if k != "rules"}
    if "when" in main:
        data["conditions"] = main["when"]
    data.update(outcomes=main.get("outcomes", []), rules=rules)
    return main.get("name"), data


class _Merge:
    """Applies the change from ``old`` to ``new`` (plan objects in the file's form) to ``node`` (the file's tree);
    ``fresh(value, like)`` makes a file value for a new one, in the style of the value it replaces."""

    def __init__(self, fresh: Callable[[Any, Any], Any]) -> None:
        self.fresh = fresh

    def value(self, node: Any, old: Any, new: Any, path: tuple) -> Any:
        kind = _DESCEND.get(tuple("*" if isinstance(p, int) else p for p in path))
        if kind == "map" and all(isinstance(v, dict) for v in (node, old, new)):
            self.mapping(node, old, new, path)
            return node
        if kind in ("named", "list") and all(isinstance(v, list) for v in (node, old, new)) \
                and len(node) == len(old) and (kind == "list" or _names(node) == _names(old)):
            self.sequence(node, old, new, path, named=kind == "named")
            return node
        return self.fresh(new, node)

    def mapping(self, node: dict, old: dict, new: dict, path: tuple) -> None:
        if not path and ("conditions" in node or "outcomes" in node):
            (old_main, old), (new_main, new) = _shorthand(old), _shorthand(new)
            if old_main != new_main:
                raise Unsupported("the rule the file gives as conditions + outcomes was removed or renamed")
        for key in old:
            at = _file_key(node, key)
            if key not in new and at is not None:
                _delete(node, at)
        previous: str | None = None
        for key, value in new.items():
            at = _file_key(node, key)
            if at is None and old.get(key, _MISSING) == value:
                continue  # the file says it another way (a first rule given as conditions + outcomes)
            if at is None:
                position = list(node).index(previous) + 1 if previous is not None else 0
                _insert(node, position, key, self.fresh(value, None))
                at = key
            elif old.get(key, _MISSING) != value:
                was = old.get(key, _MISSING)
                if (at, key) == ("paths", "path"):  # a file's list of one path stays a list
                    was, value = [was], [value]
                merged = self.value(node[at], was, value, (*path, key))
                if merged is not node[at]:
                    _set(node, at, merged)
            previous = at

    def sequence(self, node: list, old: list, new: list, path: tuple, named: bool) -> None:
        def key(item: Any) -> Any:
            return item["name"] if named else json.dumps(item, sort_keys=True, default=str)

        matcher = difflib.SequenceMatcher(None, [key(o) for o in old], [key(n) for n in new], autojunk=False)
        for tag, i1, i2, j1, j2 in reversed(matcher.get_opcodes()):
            if tag == "equal" or (tag == "replace" and i2 - i1 == j2 - j1):
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    if old[i] != new[j]:
                        merged = self.value(node[i], old[i], new[j], (*path, i))
                        if merged is not node[i]:
                            _set(node, i, merged)
                continue
            for i in reversed(range(i1, i2)):
                _delete(node, i)
            for offset, j in enumerate(range(j1, j2)):
                _insert(node, i1 + offset, None, self.fresh(new[j], None))


# --- comments that belong to what follows (ruamel keeps them on what precedes) -----------------------------------


def _commented(node: Any) -> bool:
    return isinstance(node, (CommentedMap, CommentedSeq))


def _block(node: Any) -> bool:
    return _commented(node) and len(node) > 0 and not node.fa.flow_style()


def _last(node: Any) -> Any:
    return next(reversed(node)) if isinstance(node, dict) else len(node) - 1


def _slot(parent: Any) -> int:
    return 2 if isinstance(parent, dict) else 0  # where ruamel keeps the comment after a mapping value / list item


def _take_tail(parent: Any, key: Any) -> str:
    """Detach and return the comment lines after ``parent[key]`` (ruamel keeps the comments above an item at the
    end of the item before it)."""
    if not _commented(parent):
        return ""
    value = parent[key]
    if _block(value):
        text = _take_tail(value, _last(value))
        text += "".join(" " * t.column + t.value if t.value.startswith("#") else t.value for t in value.ca.end or [])
        value.ca.end = []
        return text
    entry = parent.ca.items.get(key)
    token = entry[_slot(parent)] if entry else None
    if token is None or "\n" not in token.value:
        return ""
    line, _, rest = token.value.partition("\n")
    if line:
        token.value = line + "\n"
    else:
        entry[_slot(parent)] = None
    return rest


def _give_tail(parent: Any, key: Any, text: str) -> None:
    """Put comment lines taken by :func:`_take_tail` after ``parent[key]``."""
    if not text or not _commented(parent):
        return
    value = parent[key]
    if _block(value):
        _give_tail(value, _last(value), text)
        return
    entry = parent.ca.items.setdefault(key, [None, None, None, None])
    token = entry[_slot(parent)]
    if token is None:
        entry[_slot(parent)] = CommentToken("\n" + text, CommentMark(0), None)
    else:
        token.value = (token.value if token.value.endswith("\n") else token.value + "\n") + text


def _give_head(parent: Any, text: str) -> None:
    """Comment lines before the first item of ``parent``."""
    if not text or not _commented(parent):
        return
    if parent.ca.comment is None:
        parent.ca.comment = [None, []]
    if parent.ca.comment[1] is None:
        parent.ca.comment[1] = []
    parent.ca.comment[1].append(CommentToken(text, CommentMark(0), None))


def _set(parent: Any, key: Any, value: Any) -> None:
    tail = _take_tail(parent, key)
    parent[key] = value
    _give_tail(parent, key, tail)


def _delete(parent: Any, key: Any) -> None:
    tail = _take_tail(parent, key)
    keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
    index = keys.index(key)
    if isinstance(parent, CommentedMap):
        parent.ca.items.pop(key, None)
    del parent[key]
    if index > 0:
        _give_tail(parent, keys[index - 1], tail)
    else:
        _give_head(parent, tail)


def _insert(parent: Any, position: int, key: Any, value: Any) -> None:
    """Insert at ``position``: the comments that were above the entry there stay above it."""
    keys = list(parent) if isinstance(parent, dict) else list(range(len(parent)))
    tail = _take_tail(parent, keys[position - 1]) if position > 0 else ""
    if isinstance(parent, list):
        parent.insert(position, value)
        key = position
    elif isinstance(parent, CommentedMap):
        parent.insert(position, key, value)
    else:
        items = list(parent.items())
        items.insert(position, (key, value))
        parent.clear()
        parent.update(items)
    _give_tail(parent, key, tail)


# --- YAML and JSON -----------------------------------------------------------------------------------------------


def _forms(raw: Any, old: Plan, new: Plan, printed: Callable[[Plan], Any],
           canonical: Callable[[Plan], Any]) -> tuple[Any, Any]:
    """The old and new plan as objects in the form closer to the file: as the printer writes them (defaults left
    out, conditions as text) or canonical (every field, condition trees)."""
    as_printed, as_canonical = printed(old), canonical(old)
    if _distance(raw, as_canonical) < _distance(raw, as_printed):
        return as_canonical, canonical(new)
    return as_printed, printed(new)


def _round_trip() -> YAML:
    handler = YAML()  # round-trip mode: comments, key order, flow / block style and quotes are kept
    handler.preserve_quotes = True
    handler.width = 4096  # lines are as long as people wrote them; nothing is re-wrapped
    return handler


def _mapping_indent(text: str) -> int:
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for line, following in itertools.pairwise(lines):
        stripped = line.lstrip(" -")
        column = len(line) - len(stripped)
        if stripped.split(" #")[0].rstrip().endswith(":") and not following.lstrip().startswith("-"):
            deeper = len(following) - len(following.lstrip()) - column
            if deeper > 0:
                return deeper
    return 2


def _edit_yaml(text: str, old: Plan, new: Plan) -> str | None:
    # comments before a ``---`` line are kept as they are (ruamel.yaml would drop them)
    start = re.match(r"(?:[ \t]*(?:#[^\n]*)?\n)*---[ \t]*\n", text)
    head, body = (text[:start.end()], text[start.end():]) if start else ("", text)
    handler = _round_trip()
    raw = handler.load(body)
    if not isinstance(raw, CommentedMap):
        return None
    _, sequence, offset = load_yaml_guess_indent(body)
    # the printer's YAML read back round-trip: new values come in the printer's styles (one-line outcomes)
    was, now = _forms(raw, old, new, lambda plan: handler.load(plan_to_yaml(plan)), lambda plan: handler.load(
        pyyaml.safe_dump(plan.to_object(), sort_keys=False, allow_unicode=True, width=4096)))
    _Merge(_yaml_fresh).value(raw, was, now, ())
    handler.indent(mapping=_mapping_indent(body), sequence=sequence or 4, offset=offset if offset is not None else 2)
    out = io.StringIO()
    handler.dump(raw, out)
    return head + out.getvalue()


def _yaml_fresh(value: Any, like: Any) -> Any:
    """A copy of ``value`` for the file; a string keeps the quoting of the one it replaces, a collection its
    flow style."""
    fresh = copy.deepcopy(value)
    if isinstance(fresh, str) and "\n" in fresh and not isinstance(like, LiteralScalarString):
        return DoubleQuotedScalarString(fresh)  # line breaks as escapes, not folded lines
    if isinstance(fresh, str) and isinstance(like, ScalarString):
        return type(like)(str(fresh))
    if isinstance(fresh, list) and not _commented(fresh):
        fresh = CommentedSeq(fresh)
    if _commented(like) and _commented(fresh):
        if like.fa.flow_style():
            fresh.fa.set_flow_style()
        else:
            fresh.fa.set_block_style()
    return fresh


class _JsonLayout:
    """A JSON text read with where each of its objects and arrays was, so that unchanged ones are written back as
    they were and changed ones in the same layout (on one line, or one item a line at the file's indentation)."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.decoder = json.JSONDecoder()
        self.spans: dict[int, tuple[Any, int, int, Any]] = {}  # id -> (the value, start, end, a copy as read)
        self.root, _ = self.read(self.skip(0))
        found = re.search(r"\n([ \t]+)\S", text)
        self.unit = found.group(1) if found else "  "

    def skip(self, i: int) -> int:
        while i < len(self.text) and self.text[i] in " \t\r\n":
            i += 1
        return i

    def read(self, start: int) -> tuple[Any, int]:
        opener = self.text[start]
        if opener not in "{[":
            return self.decoder.raw_decode(self.text, start)
        value: Any = {} if opener == "{" else []
        i = self.skip(start + 1)
        while self.text[i] not in "}]":
            if opener == "{":
                key, i = json.decoder.scanstring(self.text, i + 1)  # type: ignore[attr-defined]
                value[key], i = self.read(self.skip(self.skip(i) + 1))
            else:
                item, i = self.read(i)
                value.append(item)
            i = self.skip(i)
            if self.text[i] == ",":
                i = self.skip(i + 1)
        self.spans[id(value)] = (value, start, i + 1, copy.deepcopy(value))
        return value, i + 1

    def one_line(self, value: Any) -> bool | None:
        span = self.spans.get(id(value))
        return "\n" not in self.text[span[1]:span[2]] if span and span[0] is value else None

    def write(self, value: Any, indent: str = "", one_line: bool | None = None) -> str:
        span = self.spans.get(id(value))
        if span and span[0] is value and value == span[3]:
            return self.text[span[1]:span[2]]
        if not isinstance(value, (dict, list)):
            return json.dumps(value, ensure_ascii=self.text.isascii())
        written = self.one_line(value)
        one_line = written if written is not None else one_line
        children = list(value.values()) if isinstance(value, dict) else value
        like = next((s for s in map(self.one_line, children) if s is not None), one_line)  # new items: as others
        inner = indent + self.unit
        items = [self.write(v, inner, like) for v in children]
        if isinstance(value, dict):
            items = [f"{json.dumps(k, ensure_ascii=self.text.isascii())}: {v}" for k, v in zip(value, items)]
        ends = "{}" if isinstance(value, dict) else "[]"
        if not items:
            return ends
        if one_line:
            return ends[0] + ", ".join(items) + ends[1]
        return ends[0] + "\n" + ",\n".join(inner + item for item in items) + "\n" + indent + ends[1]


def _edit_json(text: str, old: Plan, new: Plan) -> str | None:
    layout = _JsonLayout(text)
    if not isinstance(layout.root, dict):
        return None
    was, now = _forms(layout.root, old, new, lambda plan: json.loads(json.dumps(plan_object(plan))),
                      Plan.to_object)
    _Merge(lambda value, like: copy.deepcopy(value)).value(layout.root, was, now, ())
    start = layout.skip(0)
    end = layout.spans[id(layout.root)][2]
    return text[:start] + layout.write(layout.root) + text[end:]
