"""Condition expression text -- YAML ``when:`` strings and the conditions of DSL rules -- read into condition trees
(:mod:`dsl.nodes`) with the grammar (:mod:`dsl.grammar`).

Syntax::

    media_type = video and size > 1GB
    extension in [.pdf, .epub] or (name glob "*.md" and not path contains /drafts/)
    mtime > now - 7d and size between 1MB and 1.5GiB
    exif.Model startswith Canon and similarity("a beach at sunset") >= 0.4
    none(kind = directory, name startswith .) and extension not in [.part, .tmp]

- precedence: ``or`` < ``and`` < ``not`` < comparison; parentheses group (a parenthesised group stays a group);
  ``all(a, b)``, ``any(a, b)``, ``none(a, b)`` are groups too (``all()`` is true, ``any()`` false), as are
  ``true`` and ``false``.
- a comparison is ``FIELD OP VALUE``: fields are names (``size``), dotted names (``exif.Model``,
  ``metadata.codec``), ``similarity("a phrase")`` or "quoted" names; operators ``= == != < <= > >= in contains
  startswith endswith matches glob``, ``between X and Y``, and ``not`` before a word operator (``not in``,
  ``not contains``, ``not between``) negates the comparison.
- values: bare words (numbers with units ``10MB 1.5GiB 500ms 7d``, dates ``2024-01-01``, date-times
  ``2024-01-01T12:00:00Z``, ``video``, ``.pdf``, ``image/jpeg``, paths without spaces ``/tmp/x``, globs ``*.tmp``;
  a bare word is letters, digits and ``_ . / ~ * ? @ % + - :``), ``"double"`` or ``'single'`` quoted text (escapes
  ``\\" \\' \\\\ \\n \\t \\r``; any other backslash is kept, so regexes read as written), ``now``, ``now - 7d``,
  ``now + 1h`` and lists ``[a, b, c]`` (or, as in SQL, ``(a, b, c)``). A bare number is a number unless the field
  holds text (``name = 007``).

Limits (:mod:`dsl.limits`): an expression is at most 1,000,000 characters, nests at most 64 levels (parentheses,
lists, ``all()``/``any()``/``none()`` and each ``not`` of a chain add one) and spells numbers in at most 100
characters. Every error names the column (and line) of the expression and what is accepted.
"""

from __future__ import annotations

from lark import Token, Tree
from lark.exceptions import UnexpectedInput

from dsl.errors import PlanError, PlanSyntaxError, PlanValidationError, Problem, caret_context
from dsl.grammar import PARSER, Build, TooDeep
from dsl.limits import DEPTH_RULE, MAX_TEXT, TEXT_RULE
from dsl.nodes import Node
from dsl.syntax_errors import EXPRESSION_EXAMPLES, syntax_error


def _expression_tree(text: str) -> Tree[Token]:
    return PARSER.parse(text.replace("\r", " ").replace("\n", " "), start="expression")


def at_offset(text: str, offset: int, message: str, source: str | None = None) -> PlanSyntaxError:
    before = text[:offset]
    line, column = before.count("\n") + 1, offset - (before.rfind("\n") + 1) + 1
    return PlanSyntaxError(problems=[Problem(message, line=line, column=column,
                                             context=caret_context(text, line, column))], source=source)


def check_length(text: str, what: str, source: str | None = None) -> None:
    if len(text) > MAX_TEXT:
        raise at_offset(text, MAX_TEXT, f"the {what} is {len(text):,} characters long; {TEXT_RULE}", source)


def too_deep(exc: TooDeep, text: str, source: str | None = None) -> PlanSyntaxError:
    return at_offset(text, exc.token.start_pos or 0, f"nested too deeply: {DEPTH_RULE}; write long chains "
                      "flat (a and b and c), not nested", source)


def parse_expression(text: str) -> Node:
    """A condition tree from expression text (``size > 10MB and extension = .pdf``)."""
    if not isinstance(text, str):
        raise PlanSyntaxError(problems=[Problem(f"a condition expression is text, got {type(text).__name__}")])
    check_length(text, "expression")
    try:
        tree = _expression_tree(text)
    except UnexpectedInput as exc:
        raise _in_expression(syntax_error(exc, text, _expression_tree, EXPRESSION_EXAMPLES, PARSER), text) from None
    except TooDeep as exc:
        raise _in_expression(too_deep(exc, text), text) from None
    build = Build(text)
    cond: Node = build.transform(tree)
    if build.problems:
        raise _in_expression(PlanValidationError(problems=build.problems), text) from None
    return cond


def _in_expression(exc: PlanError, text: str) -> PlanError:
    """Errors of expression text (usually one line inside a YAML file) read as 'column N of the expression'."""
    p = exc.problems[0]
    where = f"column {p.column}" if "\n" not in text.strip() else f"line {p.line}, column {p.column}"
    exc.message = f"{p.message} (at {where} of the expression)\n{p.context}"
    exc.args = (exc.message,)
    return exc
