"""Conditions evaluated in Python over one entry: the semantics that :mod:`dsl.sql` compiles to SQL, so the two agree.

An entry is a mapping of the entries columns (``path``, ``name``, ``extension``, ``parent``, ``kind``, ``size``,
``mtime``, ...); an :class:`EvalContext` supplies the time ``now``, set membership and metadata values.

Semantics (the SQL compiler follows every one of them):

- A leaf whose value is missing is false, whatever its operator, except ``!=``: a NULL column (``mime``, ``hash``,
  ``parent``), no metadata row, or a value of the other kind (a number where text is compared). ``a != b`` is
  exactly ``not a = b``, so it is true for an entry without the value (``hash != abc`` for an unhashed file).
- ``media_type`` of an extension of no known kind (a NULL column) is ``other``.
- A metadata value is a number or text: the number when the classifier stored one, else the text. Numbers compare
  with numbers, text with text; ``contains`` / ``startswith`` / ``endswith`` / ``matches`` / ``glob`` always compare
  text (``metadata.year contains 19`` looks for the text "19").
- Text comparisons are case-sensitive; ordering of text (metadata only) is by code point. ``matches`` is a regular
  expression in RE2 syntax (:mod:`dsl.regex`) searched anywhere; ``glob`` matches the whole value, ``*`` any run
  of characters including ``/``, ``?`` one character, ``[abc]`` / ``[a-z]`` a class, ``[!abc]`` or ``[^abc]`` its
  complement.
- Times resolve against ``now``. A date-only value (``2024-01-01``, midnight UTC) means the whole UTC day for ``=``
  and ``!=`` and as the upper bound of ``between``; ``<``, ``<=``, ``>``, ``>=`` compare with its first instant.
- ``set = photos`` is membership of photos, ``set in [a, b]`` of any of them, ``set != photos`` not of photos.
- A computed field (``duplicates``) is asked of the context (``EvalContext.computed``); None is a missing value, as
  above (``duplicates`` of an entry not yet hashed).
- A content field (``text``) is asked of the context (``EvalContext.content``), which reads the entry's extracted
  text: ``text contains "x"`` is true when some line contains ``x`` and ``text matches "re"`` when the regular
  expression finds a match in some line, both case-sensitive like every text comparison. An entry without
  extracted text has no value (both false, ``not`` of them true).
- ``label`` and ``similarity`` are registered fields (``FieldSpec.registered``), asked of the context
  (``EvalContext.field``), which the semantic index's registrations answer (``flows.semantic.conditions``):
  ``label = invoice`` is true when the entry has the label ``invoice`` assigned (a score at or above its label
  outcome's threshold), ``label in [a, b]`` when it has either, ``label != invoice`` when it has not (an entry never
  labelled included). ``similarity("a phrase") > 0.4`` compares the best cosine similarity between the phrase and
  the entry's chunk vectors (collections of the configured model); an entry without vectors has no value (false
  whatever the operator, ``not`` of it true).
- A field whose module is not installed (or a context that cannot test it) raises :class:`FieldNotAvailable`
  naming what is missing.
"""

from __future__ import annotations

import operator
import re
from functools import lru_cache
from typing import Any, Callable, Mapping, Protocol

from dsl import units
from dsl.nodes import Compare, Group, Not
from dsl.errors import PlanError
from dsl.fields import FieldSpec, field_spec, missing_producer
from dsl.printer import condition_to_text
from dsl.regex import regex_search


class FieldNotAvailable(PlanError):
    """A condition on a field whose producer (text extraction, labels, embeddings) is not installed."""

    code = "FIELD_NOT_AVAILABLE"


class EvalContext(Protocol):
    now: float

    def member_of(self, entry: Mapping[str, Any], set_names: list[str]) -> bool:
        """Whether the entry is in any of the named sets (an unknown set has no members)."""

    def metadata(self, entry: Mapping[str, Any], key: str) -> Any | None:
        """The entry's value for ``key``: the number when one is stored, else the text; None when there is none."""

    def computed(self, entry: Mapping[str, Any], name: str) -> Any | None:
        """The value of the computed field ``name`` (``FieldSpec.computed``) for the entry; None when it has none.
        Raises :class:`FieldNotAvailable` when no installed module computes it."""

    def content(self, entry: Mapping[str, Any], name: str, op: str, value: Any) -> tuple[bool, Any]:
        """Whether some line of the entry's content field ``name`` satisfies ``op value`` (contains | matches), and
        what was seen: the first matching line ``{line, text, page?, ocr?}``; on no match ``{lines: n}`` (or
        ``{error: ...}`` when extraction failed); None when the entry has no such content. Optional: a context
        without it cannot test content fields (FieldNotAvailable)."""

    def field(self, entry: Mapping[str, Any], name: str, op: str, value: Any, arg: str | None) -> tuple[bool, Any]:
        """A registered field's leaf (``FieldSpec.registered``: label, similarity) for the entry: (verdict, what was
        seen, a mapping whose ``note`` plan-explain shows, e.g. the label scores or the best chunk). Optional: a
        context without it cannot test such fields (FieldNotAvailable)."""


TEXT_ONLY_OPS = ("contains", "startswith", "endswith", "matches", "glob")
COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge,
}
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
DAY = 86400.0


# --- shared with dsl.sql ------------------------------------------------------------------------------------------


def is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def pushable_spec(spec: FieldSpec) -> bool:
    """Whether SQL can test the field: an entries column, set membership, a metadata row, a computed field (whose
    expression the SQL context gives) or a registered field SQL decides exactly (``label``)."""
    return spec.column is not None or spec.type == "set" or spec.metadata_key is not None or spec.computed \
        or spec.registered == "exact"


def _escape(ch: str) -> str:
    # ASCII punctuation escaped with a backslash, which means "this character" in Python and PostgreSQL alike
    return "\\" + ch if ord(ch) < 128 and not (ch.isalnum() or ch == "_") else ch


@lru_cache(maxsize=512)
def glob_regex(pattern: str) -> str | None:
    """The shell glob as an anchored regular expression that RE2 and PostgreSQL read the same way, or None when
    nothing can match (a class made only of reversed ranges such as ``[z-a]``).

    ``*`` is any run (including ``/``), ``?`` one character, ``[abc]`` / ``[a-z]`` a class, ``[!abc]`` / ``[^abc]``
    its complement; a ``]`` right after the opening bracket belongs to the class and an unclosed ``[`` is literal.
    """
    out: list[str] = []
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        i += 1
        if ch == "*":
            if not out or out[-1] != ".*":
                out.append(".*")
        elif ch == "?":
            out.append(".")
        elif ch == "[":
            negate = i < n and pattern[i] in "!^"
            start = j = i + 1 if negate else i
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                j += 1
            if j >= n:
                out.append(_escape("["))
                continue
            items = _class_items(pattern[start:j])
            i = j + 1
            if items:
                out.append("[" + ("^" if negate else "") + "".join(items) + "]")
            elif negate:
                out.append(".")
            else:
                return None
        else:
            out.append(_escape(ch))
    # (?s): "." matches a newline (RE2; PostgreSQL's default); ^ and $ anchor at the very ends in both (neither is
    # in multi-line mode, and unlike Python's re, $ does not match before a final newline)
    return "(?s)^" + "".join(out) + "$"


def _class_items(body: str) -> list[str]:
    items, k = [], 0
    while k < len(body):
        if k + 2 < len(body) and body[k + 1] == "-":
            lo, hi = body[k], body[k + 2]
            if lo <= hi:
                items.append(_escape(lo) + "-" + _escape(hi))
            k += 3
        else:
            items.append(_escape(body[k]))
            k += 1
    return items


def is_date_only(value: Any) -> bool:
    return isinstance(value, str) and _DATE_ONLY.fullmatch(value) is not None


def time_tests(op: str, value: Any, now: float) -> tuple[list[tuple[str, float]], bool]:
    """A time leaf as comparisons of the timestamp that must all hold, and whether the result is negated."""
    if op == "between":
        lo, hi = value
        upper = ("<", units.resolve_time(hi, now) + DAY) if is_date_only(hi) else ("<=", units.resolve_time(hi, now))
        return [(">=", units.resolve_time(lo, now)), upper], False
    t = units.resolve_time(value, now)
    if op in ("=", "!=") and is_date_only(value):
        return [(">=", t), ("<", t + DAY)], op == "!="
    return [(op, t)], False


def not_available(spec: FieldSpec) -> FieldNotAvailable:
    reason = missing_producer(spec) or f"field {spec.name!r} cannot be tested by this version's condition evaluator"
    return FieldNotAvailable(reason, field=spec.name)


# --- evaluation ---------------------------------------------------------------------------------------------------


def evaluate(cond: Any, entry: Mapping[str, Any], ctx: EvalContext) -> bool:
    """Whether ``entry`` satisfies ``cond`` (short-circuits like ``and`` / ``or``)."""
    if isinstance(cond, Compare):
        return _leaf(cond, entry, ctx, with_seen=False)[0]
    if isinstance(cond, Not):
        return not evaluate(cond.condition, entry, ctx)
    if isinstance(cond, Group):
        hits = (evaluate(child, entry, ctx) for child in cond.conditions)
        if cond.type == "all":
            return all(hits)
        if cond.type == "any":
            return any(hits)
        return not any(hits)
    raise TypeError(f"not a condition: {cond!r}")


def explain(cond: Any, entry: Mapping[str, Any], ctx: EvalContext) -> dict[str, Any]:
    """The whole tree with each node's verdict; leaves also show the expected and the seen value."""
    node: dict[str, Any] = {"text": condition_text(cond), "type": getattr(cond, "type", None)}
    if isinstance(cond, Compare):
        spec = field_spec(cond.field)
        passed, seen = _leaf(cond, entry, ctx, with_seen=True)
        expected = cond.value
        if spec.type == "time":
            expected = [_resolved(v, ctx.now) for v in expected] if isinstance(expected, list) \
                else _resolved(expected, ctx.now)
            seen = units.format_timestamp(seen) if is_number(seen) else seen
        node.update(passed=passed, field=cond.field, op=cond.op, expected=expected, seen=seen)
        if cond.arg is not None:
            node["arg"] = cond.arg
        if spec.type == "content":
            node["note"] = content_note(passed, seen)
        elif spec.registered is not None and isinstance(seen, dict) and seen.get("note"):
            node["note"] = seen["note"]
        return node
    children = [cond.condition] if isinstance(cond, Not) else cond.conditions
    node["children"] = [explain(child, entry, ctx) for child in children]
    verdicts = [child["passed"] for child in node["children"]]
    if cond.type == "all":
        node["passed"] = all(verdicts)
    elif cond.type == "any":
        node["passed"] = any(verdicts)
    else:  # not (one child), none
        node["passed"] = not any(verdicts)
    return node


def _resolved(value: str, now: float) -> str:
    return units.format_timestamp(units.resolve_time(value, now)) if units.is_relative(value) else value


def _leaf(leaf: Compare, entry: Mapping[str, Any], ctx: EvalContext, *, with_seen: bool) -> tuple[bool, Any]:
    """(verdict, the value seen) for one leaf; for sets the value seen (the named sets the entry is in) costs one
    look-up per name, so only ``explain`` asks for it."""
    spec = field_spec(leaf.field)
    op, value = leaf.op, leaf.value
    if spec.type == "set":
        names = value if op == "in" else [value]
        member = ctx.member_of(entry, names)
        seen: Any = [n for n in names if ctx.member_of(entry, [n])] if member and with_seen else []
        return (not member if op == "!=" else member), seen
    if op == "!=":  # "not equal" is exactly "not (equal)": true for an entry without the value
        equal, seen = _leaf(leaf.model_copy(update={"op": "="}), entry, ctx, with_seen=with_seen)
        return not equal, seen
    if spec.metadata_key is not None:
        seen = ctx.metadata(entry, spec.metadata_key)
        return metadata_match(op, value, seen), seen
    if spec.registered is not None:
        field = getattr(ctx, "field", None)
        if field is None:
            raise not_available(spec)
        answer: tuple[bool, Any] = field(entry, spec.name, op, value, leaf.arg)
        return answer
    if spec.type == "content":
        content = getattr(ctx, "content", None)
        if content is None:
            raise not_available(spec)
        found: tuple[bool, Any] = content(entry, spec.name, op, value)
        return found
    if spec.computed:
        seen = ctx.computed(entry, spec.name)
        return value_match(op, value, seen, value_kind(spec)), seen
    if spec.column is None:
        raise not_available(spec)
    seen = entry.get(spec.column)
    if spec.name == "media_type" and seen is None:  # an extension of no known kind is "other"
        seen = "other"
    if spec.type == "time":
        if not is_number(seen):
            return False, seen
        tests, negate = time_tests(op, value, ctx.now)
        return all(COMPARE[o](seen, t) for o, t in tests) != negate, seen
    return value_match(op, value, seen, value_kind(spec)), seen


def value_kind(spec: FieldSpec) -> str:
    """What a column or computed field holds: number or text."""
    return "number" if spec.type in ("number", "size", "duration") else "text"


def metadata_match(op: str, value: Any, seen: Any) -> bool:
    """A metadata leaf: each value compares as a number or as text, the seen value must be of the same kind."""
    if op in TEXT_ONLY_OPS:
        return value_match(op, str(value), seen, "text")
    if op == "in":
        return any(value_match("=", v, seen, "number" if is_number(v) else "text") for v in value)
    if op == "between":
        return metadata_match(">=", value[0], seen) and metadata_match("<=", value[1], seen)
    return value_match(op, value, seen, "number" if is_number(value) else "text")


def value_match(op: str, value: Any, seen: Any, kind: str) -> bool:
    """``seen op value`` where ``kind`` (number | text) is what ``seen`` must be; otherwise false."""
    if not (is_number(seen) if kind == "number" else isinstance(seen, str)):
        return False
    if op == "in":
        return seen in value
    if op == "between":
        return bool(value[0] <= seen <= value[1])
    if op == "contains":
        return value in seen
    if op == "startswith":
        return bool(seen.startswith(value))
    if op == "endswith":
        return bool(seen.endswith(value))
    if op == "matches":
        return regex_search(value, seen)
    if op == "glob":
        regex = glob_regex(value)
        return regex is not None and regex_search(regex, seen)
    return COMPARE[op](seen, value)


def content_note(passed: bool, seen: Any) -> str:
    """What ``explain`` says of a content leaf, from the value the context saw (see ``EvalContext.content``)."""
    if passed and isinstance(seen, dict) and "line" in seen:
        where = f"line {seen['line']}" + (f" on page {seen['page']}" if seen.get("page") is not None else "")
        return f"matched {where}{' (read with OCR)' if seen.get('ocr') else ''}: {seen.get('text', '')}"
    if isinstance(seen, dict) and seen.get("error"):
        return f"no extracted text: extraction failed ({seen['error']})"
    if isinstance(seen, dict) and "lines" in seen:
        n = seen["lines"]
        return f"no line matches ({n} line{'' if n == 1 else 's'} of extracted text)"
    return "no extracted text (the file has not been extracted)"


# --- text ---------------------------------------------------------------------------------------------------------


def condition_text(cond: Any) -> str:
    """The condition as expression text (:func:`dsl.printer.condition_to_text`)."""
    return condition_to_text(cond)
