"""The Lark side of the plan language: ``plan.lark`` loaded once, the post-lexer that lets brackets span lines, the
Transformer that builds conditions (checking each comparison where it is written) and plan objects with the
position of every part, and the value spellings shared with :mod:`dsl.printer`.
"""

from __future__ import annotations

import builtins
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field as dc_field
from typing import Any

from lark import Lark, Token, Transformer, v_args
from pydantic import ValidationError

from dsl.errors import Problem, caret_context
from dsl.fields import UnknownField, field_spec
from dsl.limits import DEPTH_RULE, MAX_DEPTH, MAX_NUMBER, NUMBER_RULE
from dsl.nodes import Compare, Group, Node, Not

OPEN, CLOSE = frozenset({"LPAR", "LSQB", "LBRACE"}), frozenset({"RPAR", "RSQB", "RBRACE"})


class TooDeep(Exception):
    """Text nested deeper than :data:`dsl.limits.MAX_DEPTH`, at ``token`` (raised while lexing, before the parse
    tree could outgrow Python's recursion limit)."""

    def __init__(self, token: Token) -> None:
        super().__init__(DEPTH_RULE)
        self.token = token


class Continuations:
    """Post-lexer: a newline ends a statement, except inside ( ) [ ] { }; blank and comment lines vanish.

    It also measures nesting: each bracket opens a level, and a chain of ``not`` adds one level per ``not`` until
    its operand starts; past MAX_DEPTH it raises :class:`TooDeep` at the token that went too deep."""

    always_accept = ("_NL",)

    def process(self, stream: Iterator[Token]) -> Iterator[Token]:
        depth, last = 0, None
        level, nots = 0, 0  # nesting level, pending not chain
        saved: list[tuple[int, int]] = []  # (level, nots) outside each open bracket
        for token in stream:
            if token.type == "_NL":
                if depth > 0 or last in (None, "_NL"):
                    continue
            elif token.type in OPEN:
                depth += 1
                saved.append((level, nots))
                level, nots = level + nots + 1, 0
                if level > MAX_DEPTH:
                    raise TooDeep(token)
            elif token.type in CLOSE:
                depth = max(depth - 1, 0)
                level, nots = saved.pop() if saved else (0, 0)
                nots = 0
            elif token.type == "NOT":
                nots += 1
                if level + nots > MAX_DEPTH:
                    raise TooDeep(token)
            else:
                nots = 0
            last = token.type
            yield token


PARSER = Lark.open("plan.lark", rel_to=__file__, parser="lalr", propagate_positions=True, maybe_placeholders=True,
                   start=["plan", "expression"], postlex=Continuations())

WORD_RE = re.compile(PARSER.get_terminal("WORD").pattern.to_regexp())
KEYWORDS = frozenset(
    {t.pattern.value for t in PARSER.terminals if t.pattern.type == "str" and t.pattern.value.isalpha()}
    | {"in", "contains", "startswith", "endswith", "matches", "glob", "like", "starts_with", "ends_with"})
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", '"': '"', "'": "'"}
TEXT_TYPES = ("text", "content", "label", "set", "choice")

# The grammar knows the words of source and outcome types, not their models (which sit above it, with conditions
# that read expression text through this grammar); tests check these tables against dsl.model and dsl.outcomes.
SHORT_SOURCES = {"index": "filesystem.index", "watch": "filesystem.watch", "set": "selection_set", "query": "query"}
SOURCE_TYPES = tuple(SHORT_SOURCES.values())
SOURCE_WORDS = {**SHORT_SOURCES, **{t: t for t in SOURCE_TYPES}}
# outcome type -> the fields its positional values fill, in order (every outcome type has an entry)
POSITIONALS: dict[str, tuple[str, ...]] = {"selection_set": ("selectionSetName", "operation"),
                                           "classifier": ("classifierOperation",), "extract_text": (),
                                           "embed": ("collection",),
                                           "map": ("strategy",), "label": ("classes",), "chained": (),
                                           "move": ("to", "conflict"), "copy": ("to", "conflict"),
                                           "rename": ("name", "conflict"), "trash": ()}
# the key=value options of a label outcome; any other NAME="description" is a class with a description
LABEL_OPTIONS = ("classes", "threshold", "into", "model", "collection")
# the words of a schedule line -> the schedule's keys (tests check them against dsl.schedule.Schedule)
SCHEDULE_WORDS = {"cron": "cron", "every": "interval", "interval": "interval", "rrule": "rrule",
                  "timezone": "timezone", "anchor": "anchor"}
SCHEDULE_FORMS = 'schedule cron "0 3 * * *", schedule every 15m or schedule rrule "FREQ=DAILY;BYHOUR=6", then ' \
                 "optionally timezone ZONE (and, after every, anchor DATE-TIME)"


# --- value spellings (the printer uses the same ones) ----------------------------------------------------------


def unescape(quoted: str) -> str:
    return re.sub(r"\\(.)", lambda m: _ESCAPES.get(m.group(1), m.group(0)), quoted[1:-1])


def quote(text: str) -> str:
    """``text`` in double quotes; a backslash is doubled only where it would read as an escape (before n t r \\ " '
    and before a newline, tab or carriage return, which are written as escapes themselves)."""
    body = re.sub(r'\\(?=[ntr\\"\'\n\r\t]|$)', r"\\\\", text).replace('"', '\\"')
    return '"' + body.replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t") + '"'


def number(word: str) -> int | float | None:
    """The number a bare word spells, or None; ValueError for a number longer than MAX_NUMBER characters."""
    if _INT.fullmatch(word) or _FLOAT.fullmatch(word):
        if len(word) > MAX_NUMBER:
            raise ValueError(f"this number is {len(word):,} characters long; {NUMBER_RULE}")
        return int(word) if _INT.fullmatch(word) else float(word)
    return None


def word_value(word: str, field_type: str | None) -> Any:
    """What a bare word in a comparison means: a number (unit-less) unless the field holds text."""
    if field_type in TEXT_TYPES:
        return word
    n = number(word)
    return word if n is None else n


def option_value(word: str) -> Any:
    """What a bare word after ``key=`` means: true / false / null, a number, else text."""
    consts = {"true": True, "false": False, "null": None}
    if word in consts:
        return consts[word]
    n = number(word)
    return word if n is None else n


def is_bare(text: str) -> bool:
    return bool(WORD_RE.fullmatch(text)) and text not in KEYWORDS


# --- the Transformer -------------------------------------------------------------------------------------------


class _AtValue(Exception):
    def __init__(self, message: str, token: Token | None) -> None:
        super().__init__(message)
        self.message, self.token = message, token

Pos = tuple[int, int]
Path = tuple[Any, ...]  # a path into a plan part's data: keys and indexes


@dataclass
class Built:
    """A plan part as plain data, with the position of each of its paths (relative to the part)."""

    data: Any
    where: dict[Path, Pos] = dc_field(default_factory=dict)
    quoted: bool = False  # an option value written as "quoted text" (label class descriptions must be)

    def under(self, *prefix: Any) -> dict[Path, Pos]:
        return {(*prefix, *k): v for k, v in self.where.items()}


@dataclass
class Value:
    raw: Any  # bare word text, or a decoded str / list; fields decide what bare words mean
    token: Token | None
    bare: bool = False


@dataclass
class Field:
    name: str
    arg: str | None
    token: Token


def text_of(token: Token) -> str:
    return unescape(token.value) if token.type == "STRING" else token.value


@v_args(inline=True)
class Build(Transformer[Token, Any]):
    """Parse tree -> Nodeition models and plan objects; problems are collected with their positions."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.problems: list[Problem] = []

    # positions are computed from offsets in the original text (expression text has its newlines blanked)
    def pos(self, token: Token | None) -> Pos:
        if token is None or token.start_pos is None:
            return (1, 1)
        before = self.text[:token.start_pos]
        return before.count("\n") + 1, token.start_pos - (before.rfind("\n") + 1) + 1

    def problem(self, message: str, at: Token | Pos | None) -> None:
        line, column = at if isinstance(at, tuple) else self.pos(at)
        self.problems.append(Problem(message, line=line, column=column,
                                     context=caret_context(self.text, line, column)))

    # --- expressions --------------------------------------------------------------------------------------------

    def expression(self, cond: Node) -> Node:
        return cond

    def any_of(self, *conds: Node) -> Node:
        return conds[0] if len(conds) == 1 else Group(type="any", conditions=list(conds))

    def all_of(self, *conds: Node) -> Node:
        return conds[0] if len(conds) == 1 else Group(type="all", conditions=list(conds))

    def negate(self, _not: Token, cond: Node) -> Not:
        return Not(condition=cond)

    def group_call(self, kind: Token, *conds: Node) -> Group:
        return Group(type=kind.value, conditions=list(conds))

    def constant(self, token: Token) -> Group:
        return Group(type="all" if token.value == "true" else "any", conditions=[])

    def field(self, *tokens: Token) -> Field:
        if len(tokens) == 2:
            return Field(tokens[0].value, unescape(tokens[1].value), tokens[0])
        return Field(text_of(tokens[0]), None, tokens[0])

    def bare(self, token: Token) -> Value:
        return Value(token.value, token, bare=True)

    def quoted(self, token: Token) -> Value:
        return Value(unescape(token.value), token)

    def relative(self, now: Token, sign: Token | None = None, word: Token | None = None) -> Value:
        return Value("now" if sign is None or word is None else f"now {sign.value} {word.value}", now)

    def list(self, *values: Value) -> Value:
        return Value(list(values), values[0].token if values else None)

    def compare(self, fld: Field, op: Token, value: Value) -> Node:
        return self.check(fld, op, op.value, value)

    def compare_kw(self, fld: Field, neg: Token | None, op: Token, value: Value) -> Node:
        cond = self.check(fld, op, op.value, value)
        return Not(condition=cond) if neg is not None else cond

    def compare_between(self, fld: Field, neg: Token | None, op: Token, low: Value, high: Value) -> Node:
        cond = self.check(fld, op, "between", Value([low, high], low.token))
        return Not(condition=cond) if neg is not None else cond

    def check(self, fld: Field, op_token: Token, op: str, value: Value) -> Compare | Group:
        """Build one comparison; a wrong field, operator or value is reported at its own token."""
        try:
            spec = field_spec(fld.name)
        except UnknownField as exc:
            self.problem(str(exc), fld.token)
            return Group(type="all")

        def raw(v: Value) -> Any:
            if isinstance(v.raw, list):
                return [raw(x) for x in v.raw]
            if not v.bare:
                return v.raw
            try:
                return word_value(v.raw, spec.type)
            except ValueError as exc:  # a number too long to read
                raise _AtValue(str(exc), v.token) from None

        try:
            return Compare(field=fld.name, op=op, value=raw(value), arg=fld.arg)
        except _AtValue as exc:
            self.problem(exc.message, exc.token or op_token)
            return Group(type="all")
        except ValidationError as exc:
            message = exc.errors()[0]["msg"].removeprefix("Value error, ")
            at = op_token if message.startswith("operator") else \
                fld.token if message.startswith("field") else value.token or op_token
            self.problem(message, at)
            return Group(type="all")

    # --- plan statements ----------------------------------------------------------------------------------------

    def positional(self, token: Token) -> tuple[str, Token]:
        return ("positional", token)

    def option(self, key: Token, value: Built) -> tuple[str, Token, Built]:
        return ("option", key, value)

    def opt_scalar(self, token: Token) -> Built:
        try:
            value = option_value(token.value) if token.type == "WORD" else unescape(token.value)
        except ValueError as exc:  # a number too long to read
            self.problem(str(exc), token)
            value = None
        return Built(value, {(): self.pos(token)}, quoted=token.type == "STRING")

    def opt_list(self, *values: Built) -> Built:
        where: dict[Path, Pos] = {}
        for i, v in enumerate(values):
            where.update(v.under(i))
        return Built([v.data for v in values], where)

    def opt_map(self, *options: tuple[str, Token, Built]) -> Built:
        return Built(*self.options(options))

    def options(self, options: Iterable[tuple[Any, ...]], data: dict[str, Any] | None = None,
                where: dict[Path, Pos] | None = None, prefix: Path = ()) -> tuple[dict[str, Any], dict[Path, Pos]]:
        data = {} if data is None else data
        where = {} if where is None else where
        for _, key, value in options:
            name = text_of(key)
            if name in data:
                self.problem(f"{name!r} is given twice; give each option once", key)
            data[name] = value.data
            where.update(value.under(*prefix, name))
            where[(*prefix, name)] = self.pos(key)
        return data, where

    def description(self, token: Token) -> tuple[str, Built]:
        return ("description", Built(text_of(token), {("description",): self.pos(token)}))

    def mode(self, token: Token) -> tuple[str, Built]:
        return ("mode", Built(text_of(token), {("mode",): self.pos(token)}))

    def status(self, token: Token) -> tuple[str, Built]:
        return ("status", Built(text_of(token), {("status",): self.pos(token)}))

    def schedule(self, *items: tuple[Any, ...]) -> tuple[str, Built]:
        """``schedule cron "0 3 * * *" timezone Europe/Berlin``: words each followed by its value (or
        ``word=value``)."""
        first = items[0][1]
        data: dict[str, Any] = {}
        where: dict[Path, Pos] = {("schedule",): self.pos(first)}
        pairs: list[tuple[Token, Any, Pos | None]] = []  # (word, value, where the value is); None: no value
        for item in items:
            if item[0] == "option":
                pairs.append((item[1], item[2].data, item[2].where.get((), self.pos(item[1]))))
            elif pairs and pairs[-1][2] is None:
                pairs[-1] = (pairs[-1][0], text_of(item[1]), self.pos(item[1]))
            else:
                pairs.append((item[1], None, None))
        for word, value, at in pairs:
            key = SCHEDULE_WORDS.get(word.value) if word.type == "WORD" else None
            if key is None:
                after = next(reversed(data), None)
                hint = f"quote the {after} text (it has spaces); " if after in ("cron", "rrule") else ""
                self.problem(f"{text_of(word)!r} is not part of a schedule; {hint}write {SCHEDULE_FORMS}", word)
                break
            if at is None:
                self.problem(f"missing value after {word.value!r}; write {SCHEDULE_FORMS}", word)
                break
            if key in data:
                self.problem(f"{word.value!r} is given twice; give it once", word)
            data[key] = value
            where[("schedule", key)] = at
        return ("schedule", Built(data, where))

    def prefer(self, *options: tuple[str, Token, Built]) -> tuple[str, Built]:
        return ("preferences", Built(*self.options(options, prefix=("preferences",))))

    def source(self, name: Token, kind: Token, *items: tuple[Any, ...]) -> tuple[str, Built]:
        data: dict[str, Any] = {"name": text_of(name)}
        where: dict[Path, Pos] = {(): self.pos(name), ("name",): self.pos(name), ("type",): self.pos(kind)}
        type_ = SOURCE_WORDS.get(text_of(kind))
        if type_ is None:
            self.problem(f"unknown source type {text_of(kind)!r}; use index, watch, set or query (or "
                         f"{', '.join(SOURCE_TYPES)})", kind)
            type_ = text_of(kind)
        data["type"] = type_
        config: dict[str, Any] = {}
        positionals = [item[1] for item in items if item[0] == "positional"]
        for i, token in enumerate(positionals):
            if token.type == "WORD" and token.value == "into":
                if i + 1 == len(positionals):
                    self.problem("missing set name after 'into': into SET", token)
                else:
                    data["target_set"] = text_of(positionals[i + 1])
                    where[("target_set",)] = self.pos(positionals[i + 1])
                positionals = positionals[:i] + positionals[i + 2:]
                break
        self.options([i for i in items if i[0] == "option"], config, where, ("config",))
        if positionals:
            key = {"selection_set": "set", "query": "query"}.get(type_, "paths")
            where[("config", key)] = where[("config",)] = self.pos(positionals[0])
            if key == "paths":
                config["paths"] = [*config.get("paths", []), *(text_of(t) for t in positionals)]
            elif len(positionals) > 1 or key in config:
                self.problem(f"a {type_} source takes one {key} name; give other settings as key=value",
                             positionals[1] if len(positionals) > 1 else positionals[0])
            else:
                config[key] = text_of(positionals[0])
        if config:
            data["config"] = config
        return ("sources", Built(data, where))

    def rule(self, name: Token, when: Node | None, *outcomes: Built) -> tuple[str, Built]:
        data: dict[str, Any] = {"name": text_of(name)}
        where: dict[Path, Pos] = {(): self.pos(name), ("name",): self.pos(name), ("when",): self.pos(name)}
        if when is not None:
            data["when"] = when
        data["outcomes"] = [o.data for o in outcomes]
        for i, o in enumerate(outcomes):
            where.update(o.under("outcomes", i))
        return ("rules", Built(data, where))

    def do_line(self, outcome: Built) -> Built:
        return outcome

    def members(self, *outcomes: Built) -> tuple[str, tuple[Built, ...]]:
        return ("members", outcomes)

    def outcome(self, kind: Token, *rest: Any) -> Built:
        *items, when = rest
        type_ = text_of(kind)
        data: dict[str, Any] = {"type": type_}
        where: dict[Path, Pos] = {(): self.pos(kind), ("type",): self.pos(kind)}
        if type_ not in POSITIONALS:
            self.problem(f"unknown outcome type {type_!r}; use one of: {', '.join(POSITIONALS)}", kind)
            return Built(data, where)
        slots = POSITIONALS[type_]
        positionals = [item[1] for item in items if item[0] == "positional"]
        if type_ == "label":
            items = self.label_classes(items, data, where)
        else:
            if len(positionals) > len(slots):
                took = f"takes {len(slots)} value(s) ({', '.join(slots)})" if slots else "takes no values"
                self.problem(f"{'an' if type_[0] in 'aeiou' else 'a'} {type_} outcome {took}; give other "
                             "settings as key=value",
                             positionals[len(slots)])
            for slot, token in zip(slots, positionals):
                data[slot] = text_of(token)
                where[(slot,)] = self.pos(token)
        self.options([i for i in items if i[0] == "option"], data, where)
        for item in items:
            if item[0] == "members":
                if type_ != "chained":
                    self.problem(f"only a chained outcome takes a (...) list of outcomes, not {type_}", kind)
                data["outcomes"] = [o.data for o in item[1]]
                for i, o in enumerate(item[1]):
                    where.update(o.under("outcomes", i))
        if when is not None:
            data["when"] = when
            where[("when",)] = self.pos(kind)
        return Built(data, where)

    def label_classes(self, items: builtins.list[Any], data: dict[str, Any],
                      where: dict[Path, Pos]) -> builtins.list[Any]:
        """A label outcome's classes, in the order written: bare or quoted values are class names, and
        ``NAME="description"`` (an option whose key is not one of :data:`LABEL_OPTIONS`) a class with a
        description. Returns the other items (its options)."""
        classes: list[Any] = []
        rest = []
        for item in items:
            if item[0] == "positional":
                where[("classes", len(classes))] = self.pos(item[1])
                classes.append(text_of(item[1]))
            elif item[0] == "option" and text_of(item[1]) not in LABEL_OPTIONS:
                key, value = item[1], item[2]
                if not (value.quoted and isinstance(value.data, str)):
                    self.problem(f"{text_of(key)!r} is not an option of a label outcome ({', '.join(LABEL_OPTIONS)}); "
                                 f'a class with a description is written NAME="what it means", the description '
                                 "in quotes", key)
                    continue
                where[("classes", len(classes))] = self.pos(key)
                classes.append({"name": text_of(key), "description": value.data})
            else:
                rest.append(item)
        if classes:  # classes=[...] as well is reported by options() as given twice
            data["classes"] = classes
            where[("classes",)] = where[("classes", 0)]
        return rest

    def plan(self, name: Token, *statements: tuple[str, Built]) -> Built:
        data: dict[str, Any] = {"name": text_of(name)}
        where: dict[Path, Pos] = {(): self.pos(name), ("name",): self.pos(name)}
        for kind, built in statements:
            if kind in ("sources", "rules"):
                items = data.setdefault(kind, [])
                where.update(built.under(kind, len(items)))
                items.append(built.data)
            elif kind == "preferences":
                prefs = data.setdefault("preferences", {})
                for key in built.data:
                    if key in prefs:
                        self.problem(f"preference {key!r} is given twice", built.where[("preferences", key)])
                prefs.update(built.data)
                where.update(built.where)
            else:
                if kind in data:
                    self.problem(f"{kind!r} is given twice; give it once", built.where[(kind,)])
                data[kind] = built.data
                where.update(built.where)
        return Built(data, where)
