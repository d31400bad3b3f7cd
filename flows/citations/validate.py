"""Checking a map an agent supplies (raw JSON from a tool call) against the file it maps, before it is stored.

Every node is checked and every problem reported at once, each named with its node (its id, or its path such as
``nodes[2].children[0]`` when the id is missing or unusable), so an agent can fix the whole map in one round:
CitationError INVALID_MAP with ``details["problems"] = [{"node": ..., "problem": ...}, ...]``.

What is checked: each node is an object with known keys only; ids match ``NODE_ID_PATTERN``, are unique, and nest
(a child's id is its parent's id, a dot and one more part; a top-level id has no dot); a location of the file's
modality holding that modality's fields only (pages / lines ``[first, last]`` or ``[n]`` within the file's extent,
``start``/``end`` within its duration, ``bbox`` four fractions with x1 < x2 and y1 < y2); title, summary and type
strings of bounded length; at most ``MAX_NODES`` nodes and ``MAX_DEPTH`` levels.
"""

from __future__ import annotations

import math
import re
from typing import Any

from flows.citations.address import bbox_problem, duration_problem, extent_problem, span_problem, time_problem
from flows.citations.model import MAX_NODES, NODE_ID_PATTERN, Location, Node, SourceFacts
from store.errors import CitationError

MAX_DEPTH = 32
MAX_TITLE_CHARS = 500
MAX_SUMMARY_CHARS = 5_000
MAX_TYPE_CHARS = 64
MAX_ID_CHARS = 512
SHOWN_PROBLEMS = 3  # problems quoted in the message; all are in details

NODE_KEYS = ("id", "title", "type", "location", "summary", "children")
LOCATION_KEYS = ("modality", "start", "end", "pages", "lines", "bbox", "virtual_address")
# the location fields each modality takes (all required: a node cites a part of the file)
MODALITY_FIELDS: dict[str, tuple[str, ...]] = {"document": ("pages",), "text": ("lines",),
                                               "video": ("start", "end"), "audio": ("start", "end"),
                                               "image": ("bbox",)}
FIELD_EXAMPLE: dict[str, str] = {"document": '"pages": [3, 5]', "text": '"lines": [10, 20]',
                                 "video": '"start": 12.5, "end": 40', "audio": '"start": 12.5, "end": 40',
                                 "image": '"bbox": [0.2, 0.2, 0.8, 0.8]'}
_NODE_ID = re.compile(NODE_ID_PATTERN)


class _Checker:
    """One pass over the tree, collecting problems and the cleaned nodes."""

    def __init__(self, facts: SourceFacts) -> None:
        self.facts = facts
        self.problems: list[dict[str, str]] = []
        self.seen: set[str] = set()
        self.count = 0
        self.too_deep_reported = False

    def problem(self, node: str, text: str) -> None:
        self.problems.append({"node": node, "problem": text})

    def node(self, raw: Any, path: str, parent_id: str | None, depth: int) -> Node | None:
        """The node at ``path`` as a Node, or None when it has problems (recorded); its children are checked either
        way."""
        self.count += 1
        if not isinstance(raw, dict):
            self.problem(path, f"a node must be an object with an id and a location, not {_kind(raw)}")
            return None
        before = len(self.problems)
        node_id = self.node_id(raw.get("id"), path, parent_id, "id" in raw)
        name = node_id or path
        unknown = sorted(str(k) for k in raw if k not in NODE_KEYS)
        if unknown:
            self.problem(name, f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))}; a "
                               f"node takes {', '.join(NODE_KEYS)}")
        title = self.text(raw, "title", MAX_TITLE_CHARS, name)
        summary = self.text(raw, "summary", MAX_SUMMARY_CHARS, name)
        kind = raw.get("type")
        kind = "section" if kind is None else kind
        if not isinstance(kind, str) or not kind.strip() or len(kind) > MAX_TYPE_CHARS:
            self.problem(name, f"type must be a short non-empty string (at most {MAX_TYPE_CHARS} characters, e.g. "
                               f"\"section\", \"chapter\", \"figure\"), not {_shown(kind)}")
        location = self.location(raw.get("location"), name, "location" in raw)
        children_raw = raw.get("children", [])
        children: list[Node] = []
        if children_raw is None:
            children_raw = []
        if not isinstance(children_raw, list):
            self.problem(name, f"children must be a list of nodes, not {_kind(children_raw)}")
        elif children_raw:
            if depth >= MAX_DEPTH:
                if not self.too_deep_reported:
                    self.problem(name, f"the map nests deeper than {MAX_DEPTH} levels; flatten it")
                    self.too_deep_reported = True
            else:
                # "": the parent's id is unusable, so its children's nesting is not checked (its own problem says
                # what to fix)
                for i, child in enumerate(children_raw):
                    built = self.node(child, f"{path}.children[{i}]", node_id or "", depth + 1)
                    if built is not None:
                        children.append(built)
        if len(self.problems) > before or location is None or node_id is None:
            return None
        return Node(id=node_id, title=title, type=kind, location=location, summary=summary, children=children)

    def node_id(self, value: Any, path: str, parent_id: str | None, present: bool) -> str | None:
        """The id if usable (a string of the pattern, not too long); the nesting and uniqueness checks are
        recorded against it. ``parent_id`` "" means the parent's id was unusable (nesting not checked)."""
        if not present or value is None:
            self.problem(path, "id missing; give each node a unique id such as \"chapter_1\" (a child: "
                               "\"chapter_1.intro\")")
            return None
        if not isinstance(value, str) or len(value) > MAX_ID_CHARS or not _NODE_ID.fullmatch(value):
            self.problem(path, f"id {_shown(value)} is not usable: an id is letters, digits, _ and -, in parts "
                               f"joined by dots (\"chapter_1.intro\"), at most {MAX_ID_CHARS} characters")
            return None
        if value in self.seen:
            self.problem(value, f"id {value!r} is used by more than one node; ids must be unique in the map")
        self.seen.add(value)
        if parent_id is None and "." in value:
            self.problem(value, f"a top-level id has no dot; {value!r} reads as a child of "
                                f"{value.rsplit('.', 1)[0]!r} (nest it under that node or rename it)")
        elif parent_id and (not value.startswith(parent_id + ".") or "." in value[len(parent_id) + 1:]):
            example = parent_id + "." + value.rsplit(".", 1)[-1]
            self.problem(value, f"id {value!r} is not nested in its parent {parent_id!r}: a child's id is its "
                                f"parent's id, a dot and one more part, e.g. {example!r}")
        return value

    def text(self, raw: dict, key: str, limit: int, name: str) -> str | None:
        value = raw.get(key)
        if value is None:
            return None
        if not isinstance(value, str):
            self.problem(name, f"{key} must be a string, not {_kind(value)}")
            return None
        if len(value) > limit:
            self.problem(name, f"{key} is {len(value)} characters long; at most {limit}")
            return None
        return value

    def location(self, raw: Any, name: str, present: bool) -> Location | None:
        facts = self.facts
        want = MODALITY_FIELDS.get(facts.modality, ())
        if not present or raw is None:
            self.problem(name, f"location missing; give {{\"modality\": \"{facts.modality}\", "
                               f"{FIELD_EXAMPLE.get(facts.modality, '')}}}")
            return None
        if not isinstance(raw, dict):
            self.problem(name, f"location must be an object, not {_kind(raw)}")
            return None
        before = len(self.problems)
        unknown = sorted(str(k) for k in raw if k not in LOCATION_KEYS)
        if unknown:
            self.problem(name, f"unknown location key{'s' if len(unknown) > 1 else ''} "
                               f"{', '.join(map(repr, unknown))}; a location takes {', '.join(LOCATION_KEYS)}")
        modality = raw.get("modality")
        example = FIELD_EXAMPLE.get(facts.modality, "no extent")
        if modality != facts.modality:
            what = "missing" if modality is None else f"{_shown(modality)}"
            self.problem(name, f"location.modality is {what}; this file is {_a(facts.modality)}: give "
                               f"\"modality\": \"{facts.modality}\" with {example}")
        if modality != facts.modality:  # its fields are of another modality too: the problem above says it all
            return None
        other = [k for k in ("start", "end", "pages", "lines", "bbox") if k not in want and raw.get(k) is not None]
        if other:
            self.problem(name, f"location.{', location.'.join(other)}: not of {_a(facts.modality)}; "
                               f"{_a(facts.modality)} location takes {example}")
        missing = [k for k in want if raw.get(k) is None]
        if missing:
            self.problem(name, f"location.{' and location.'.join(missing)} missing; e.g. "
                               f"{FIELD_EXAMPLE[facts.modality]}")
        values: dict[str, Any] = {}
        if not missing:
            if facts.modality in ("document", "text"):
                key = want[0]
                span = self.span(raw[key], key, name)
                if span is not None:
                    values[key] = list(span)
            elif facts.modality in ("video", "audio"):
                times = self.times(raw["start"], raw["end"], name)
                if times is not None:
                    values["start"], values["end"] = times
            elif facts.modality == "image":
                box = self.bbox(raw["bbox"], name)
                if box is not None:
                    values["bbox"] = box
        virtual = raw.get("virtual_address")
        if virtual is not None and not isinstance(virtual, str):
            self.problem(name, f"location.virtual_address must be a string (it is filled in when the map is "
                               f"shown, and may be left out), not {_kind(virtual)}")
        if len(self.problems) > before:
            return None
        return Location(modality=facts.modality, **values)  # virtual_address: filled when the map is shown

    def span(self, value: Any, key: str, name: str) -> tuple[int, int] | None:
        """pages / lines: ``[first, last]`` or ``[n]``, whole numbers >= 1, first <= last, within the extent."""
        example = "[3, 5]" if key == "pages" else "[10, 20]"
        numbers = value if isinstance(value, list) else None
        if numbers is None or len(numbers) not in (1, 2) or not all(_whole(v) for v in numbers):
            self.problem(name, f"location.{key} must be [first, last] or [n], whole numbers (e.g. {example}), "
                               f"not {_shown(value)}")
            return None
        first, last = int(numbers[0]), int(numbers[-1])
        problem = span_problem(key, first, last) or extent_problem(
            key, first, last, self.facts.page_count if key == "pages" else self.facts.line_count)
        if problem:
            self.problem(name, f"location.{key} {_shown(value)}: {problem}")
            return None
        return first, last

    def times(self, start: Any, end: Any, name: str) -> tuple[float, float] | None:
        """start / end: numbers of seconds, 0 <= start < end, end <= duration + END_TOLERANCE."""
        bad = [k for k, v in (("start", start), ("end", end)) if not _number(v)]
        if bad:
            self.problem(name, f"location.{' and location.'.join(bad)} must be a number of seconds "
                               f"(e.g. \"start\": 12.5, \"end\": 40)")
            return None
        start, end = float(start), float(end)
        problem = time_problem(start, end) or duration_problem(start, end, self.facts.duration, self.facts.modality)
        if problem:
            self.problem(name, f"location start {_num(start)}, end {_num(end)}: {problem}")
            return None
        return start, end

    def bbox(self, value: Any, name: str) -> list[float] | None:
        if not isinstance(value, list) or not all(_number(v) for v in value):
            self.problem(name, f"location.bbox must be four numbers [x1, y1, x2, y2] (fractions 0-1, e.g. "
                               f"[0.2, 0.2, 0.8, 0.8]), not {_shown(value)}")
            return None
        box = [float(v) for v in value]
        problem = bbox_problem(box)
        if problem:
            self.problem(name, f"location.bbox {_shown(value)}: {problem}")
            return None
        return box


def _a(word: str) -> str:
    return f"an {word}" if word[:1] in "aeiou" else f"a {word}"


def _number(value: Any) -> bool:
    """A finite JSON number (not a boolean; an integer too big for a float is not one either)."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def _whole(value: Any) -> bool:
    return _number(value) and float(value).is_integer()


def _num(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null"}.get(
        type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def validate_nodes(nodes: list[dict], facts: SourceFacts) -> list[Node]:
    """The agent's node tree ``nodes`` as pydantic Nodes (``location.virtual_address`` left None), checked against
    the file ``facts`` describe. CitationError INVALID_MAP listing every problem (see the module's docstring)."""
    checker = _Checker(facts)
    if not isinstance(nodes, list):
        checker.problem("nodes", f"nodes must be a list of node objects, not {_kind(nodes)}")
    elif not nodes:
        checker.problem("nodes", "the map has no nodes; give at least one")
    else:
        built = [checker.node(raw, f"nodes[{i}]", None, 1) for i, raw in enumerate(nodes)]
        if checker.count > MAX_NODES:
            checker.problems.insert(0, {"node": "nodes", "problem": f"the map has {checker.count} nodes; at most "
                                                                    f"{MAX_NODES}"})
    if checker.problems:
        n = len(checker.problems)
        shown = "; ".join(f"{p['node']}: {p['problem']}" for p in checker.problems[:SHOWN_PROBLEMS])
        more = f"; ... ({n - SHOWN_PROBLEMS} more in details.problems)" if n > SHOWN_PROBLEMS else ""
        raise CitationError("INVALID_MAP", f"{n} problem{'s' if n != 1 else ''} in the map: {shown}{more}",
                            field="nodes", details={"problems": checker.problems})
    return [node for node in built if node is not None]

