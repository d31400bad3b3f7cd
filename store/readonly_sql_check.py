"""The lexical pre-check of ``query_sql``: which SQL text is accepted before it reaches a read-only connection.

The connection itself is the guarantee that nothing is written (store.readonly_sql); this check is there for clear
messages, and for what a read-only connection still allows: a PostgreSQL function with side effects
(``set_config``, ``pg_advisory_lock``, ``lo_import``, ``query_to_xml`` running a query hidden in a string, ...).
It reads the query the way the database's own lexer does, so text inside comments, string literals (``'..'``,
PostgreSQL's ``E'..'`` and dollar-quoted ``$tag$..$tag$``) and quoted identifiers is never taken for a keyword or a
``;``, and a leading comment does not hide the statement's first keyword.

Accepted: one SELECT, WITH ... SELECT, VALUES, TABLE (PostgreSQL) or EXPLAIN without ANALYZE, and on SQLite the
read-only informational PRAGMAs of :data:`TABLE_PRAGMAS` and :data:`VALUE_PRAGMAS`.
"""

from __future__ import annotations

import re
from typing import Literal, NamedTuple

from store.errors import CodedError

Dialect = Literal["sqlite", "postgresql"]


class SqlRefused(CodedError):
    """A query ``query_sql`` will not run: SQL_NOT_ALLOWED for what is refused (a write, a second statement, a
    function with side effects, a PRAGMA that changes something), with what would be accepted; SQL_ERROR with the
    database's own message for a query it rejects (syntax, no such table)."""

    CODES = ("SQL_NOT_ALLOWED", "SQL_ERROR")
    KIND = "query_sql"


# PRAGMAs that read the schema of the table or index they name (the argument), and PRAGMAs read without an argument
# (with one they would set something)
TABLE_PRAGMAS = frozenset({"table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
                           "foreign_key_list", "foreign_key_check"})
VALUE_PRAGMAS = frozenset({"user_version", "application_id", "schema_version", "data_version", "page_count",
                           "page_size", "freelist_count", "encoding", "compile_options", "collation_list",
                           "function_list", "module_list", "pragma_list"})

_FIRST_KEYWORDS: dict[str, frozenset[str]] = {
    "sqlite": frozenset({"select", "with", "values", "explain", "pragma"}),
    "postgresql": frozenset({"select", "with", "values", "table", "explain"}),
}

# Words that write or lock wherever they stand in a statement that starts as a read: a data-modifying WITH, SELECT
# INTO, SELECT ... FOR UPDATE, EXPLAIN ANALYZE (which runs the statement).
_WRITE_WORDS = frozenset({"insert", "update", "delete", "merge", "into", "analyze", "analyse"})

# Functions with side effects that a read-only transaction (or connection) still runs, by name or name prefix; each
# refused wherever its name stands (also schema-qualified or quoted). pg_sleep is allowed: the time limit ends it.
DENIED_FUNCTIONS = frozenset({
    # PostgreSQL: settings (set_config can even take back the role the query runs as), notifications, backends,
    # transaction ids and sequences, SQL run from a string, server files and administration
    "set_config", "pg_notify", "pg_cancel_backend", "pg_terminate_backend", "pg_reload_conf", "pg_rotate_logfile",
    "pg_switch_wal", "pg_promote", "pg_stat_file", "pg_current_xact_id", "pg_current_xact_id_if_assigned",
    "txid_current", "txid_current_if_assigned", "nextval", "setval", "loread", "lowrite", "query_to_xml",
    "query_to_xmlschema", "query_to_xml_and_xmlschema", "cursor_to_xml", "cursor_to_xmlschema", "ts_stat",
    "ts_rewrite", "pg_import_system_collations", "pg_log_backend_memory_contexts", "pg_start_backup",
    "pg_stop_backup", "pg_export_snapshot",
    # SQLite: extensions and the command-line shell's file functions
    "load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "zipfile",
})
DENIED_PREFIXES = ("lo_", "dblink", "pg_advisory", "pg_try_advisory", "pg_read_", "pg_ls_", "pg_file_",
                   "pg_stat_reset", "pg_replication_", "pg_create_", "pg_drop_", "pg_logical_", "pg_backup_",
                   "pg_wal_")


def accepted(dialect: Dialect) -> str:
    """What ``query_sql`` accepts, for the messages of its refusals."""
    text = "one SELECT, WITH ... SELECT, VALUES, TABLE or EXPLAIN (without ANALYZE)"
    if dialect == "sqlite":
        text = (text.replace("TABLE or", "or") + "; or PRAGMA name(table) for " + ", ".join(sorted(TABLE_PRAGMAS))
                + "; or PRAGMA name (no value) for " + ", ".join(sorted(VALUE_PRAGMAS)))
    return text + "; page through long results with LIMIT/OFFSET"


def function_denied(name: str) -> bool:
    """Whether ``name`` (a function's, any case) is one with side effects that ``query_sql`` refuses."""
    lowered = name.lower()
    return lowered in DENIED_FUNCTIONS or lowered.startswith(DENIED_PREFIXES)


def pragma_allowed(name: str, argument: str | None) -> bool:
    """Whether ``PRAGMA name`` (with ``argument``, None when there is none) only reads."""
    lowered = name.lower()
    return lowered in TABLE_PRAGMAS or (lowered in VALUE_PRAGMAS and argument is None)


class Token(NamedTuple):
    """One lexical token: ``kind`` is word (a bare name or keyword), ident (a quoted identifier, unquoted), string,
    number, param or punct; ``pos`` the offset of its first character in the query."""

    kind: str
    text: str
    pos: int

    def word(self) -> str:
        """The lower-case text of a bare word, "" for any other token."""
        return self.text.lower() if self.kind == "word" else ""


_PG_DOLLAR = re.compile(r"\$([A-Za-z_\u0080-\U0010ffff][A-Za-z0-9_\u0080-\U0010ffff]*)?\$")
_NUMBER = re.compile(r"0[xXoObB][0-9A-Fa-f_]+|(?:\d[\d_]*(?:\.[\d_]*)?|\.\d[\d_]*)(?:[eE][+-]?\d+)?")


_SPACE = " \t\n\r\f\v"  # both lexers' white space; any other character from U+0080 up belongs to a name


def _line_comment_end(query: str, start: int, dialect: Dialect) -> int:
    """The offset past the ``--`` comment at ``start``: PostgreSQL ends it at a line feed or a carriage return,
    SQLite at a line feed only."""
    ends = [k for k in (query.find("\n", start), query.find("\r", start) if dialect == "postgresql" else -1)
            if k >= 0]
    return min(ends) + 1 if ends else len(query)


def _is_ident_start(ch: str) -> bool:
    return ch.isalpha() or ch == "_" or ord(ch) >= 0x80


def _is_ident_char(ch: str) -> bool:
    return ch.isalnum() or ch in "_$" or ord(ch) >= 0x80


def _lex_error(what: str, pos: int) -> SqlRefused:
    return SqlRefused("SQL_ERROR", f"{what} starting at character {pos + 1} is never closed")


def _quoted_end(query: str, start: int, quote: str, *, backslash: bool = False) -> int:
    """The offset just past the literal or identifier opened by ``quote`` at ``start`` (a doubled quote stands for
    itself; with ``backslash``, as in PostgreSQL's E'..', a backslash escapes the next character)."""
    i, n = start + 1, len(query)
    while i < n:
        ch = query[i]
        if backslash and ch == "\\":
            i += 2
            continue
        if ch == quote:
            if i + 1 < n and query[i + 1] == quote:
                i += 2
                continue
            return i + 1
        i += 1
    raise _lex_error("a string literal" if quote == "'" else "a quoted identifier", start)


def _comment_end(query: str, start: int, dialect: Dialect) -> int:
    """The offset just past the ``/* */`` comment at ``start``: nested on PostgreSQL; on SQLite the first ``*/``
    ends it and an unclosed one runs to the end, as SQLite reads it."""
    depth, i, n = 1, start + 2, len(query)
    while i < n:
        if query.startswith("*/", i):
            depth -= 1
            i += 2
            if depth == 0 or dialect == "sqlite":
                return i
        elif dialect == "postgresql" and query.startswith("/*", i):
            depth += 1
            i += 2
        else:
            i += 1
    if dialect == "sqlite":
        return n
    raise _lex_error("a /* comment", start)


def _sqlite_param_end(query: str, start: int) -> int:
    """The offset past a SQLite parameter ``:name``, ``@name``, ``$name`` (with its ``::`` and ``(..)`` parts)."""
    i, n, named = start + 1, len(query), 0
    while i < n:
        ch = query[i]
        if _is_ident_char(ch):
            named += 1
            i += 1
        elif ch == "(" and named:
            while i < n and query[i] not in _SPACE and query[i] != ")":
                i += 1
            return i + 1 if i < n and query[i] == ")" else i
        elif query.startswith("::", i):
            i += 2
        else:
            break
    return i


def tokenize(query: str, dialect: Dialect) -> list[Token]:
    """The tokens of ``query``, comments and white space left out. SqlRefused (SQL_ERROR) for a literal, quoted
    identifier or PostgreSQL comment never closed; SQL_NOT_ALLOWED for PostgreSQL's Unicode-escaped identifiers
    (``U&"..."``: a name the check could not read)."""
    tokens: list[Token] = []
    i, n = 0, len(query)
    while i < n:
        ch = query[i]
        if ch in _SPACE:
            i += 1
        elif query.startswith("--", i):
            i = _line_comment_end(query, i, dialect)
        elif query.startswith("/*", i):
            i = _comment_end(query, i, dialect)
        elif ch == "'":
            end = _quoted_end(query, i, "'")
            tokens.append(Token("string", query[i + 1:end - 1], i))
            i = end
        elif ch == '"' or (dialect == "sqlite" and ch == "`"):
            end = _quoted_end(query, i, ch)
            tokens.append(Token("ident", query[i + 1:end - 1].replace(ch * 2, ch), i))
            i = end
        elif dialect == "sqlite" and ch == "[":
            end = query.find("]", i)
            if end < 0:
                raise _lex_error("a quoted identifier", i)
            tokens.append(Token("ident", query[i + 1:end], i))
            i = end + 1
        elif dialect == "postgresql" and ch == "$" and (dollar := _PG_DOLLAR.match(query, i)):
            close = query.find(dollar.group(0), dollar.end())
            if close < 0:
                raise _lex_error("a dollar-quoted string", i)
            tokens.append(Token("string", query[dollar.end():close], i))
            i = close + len(dollar.group(0))
        elif dialect == "sqlite" and ch in ":@$#?":
            end = _sqlite_param_end(query, i)
            tokens.append(Token("param", query[i:end], i))
            i = end
        elif dialect == "postgresql" and ch == "$" and i + 1 < n and query[i + 1].isdigit():
            end = i + 1
            while end < n and query[end].isdigit():
                end += 1
            tokens.append(Token("param", query[i:end], i))
            i = end
        elif _is_ident_start(ch):
            end = i + 1
            while end < n and _is_ident_char(query[end]):
                end += 1
            word = query[i:end]
            if dialect == "postgresql" and word in ("e", "E") and end < n and query[end] == "'":
                close = _quoted_end(query, end, "'", backslash=True)
                tokens.append(Token("string", query[end + 1:close - 1], i))
                i = close
            elif dialect == "postgresql" and word in ("u", "U") and query.startswith('&"', end):
                raise SqlRefused("SQL_NOT_ALLOWED", f"a Unicode-escaped identifier (U&\"...\") at character {i + 1} "
                                                    "is not accepted: write the name plainly or in double quotes")
            else:
                tokens.append(Token("word", word, i))
                i = end
        elif number := _NUMBER.match(query, i):
            tokens.append(Token("number", number.group(0), i))
            i = number.end()
        else:
            tokens.append(Token("punct", ch, i))
            i += 1
    return tokens


def leading_keyword(query: str, dialect: Dialect) -> str:
    """The statement's first keyword in lower case (after comments and opening parentheses); "" when there is none
    or the query cannot be read."""
    try:
        tokens = tokenize(query, dialect)
    except SqlRefused:
        return ""
    for token in tokens:
        if token.kind != "punct" or token.text != "(":
            return token.word()
    return ""


def _refuse(what: str, dialect: Dialect) -> SqlRefused:
    return SqlRefused("SQL_NOT_ALLOWED", f"{what}; query_sql accepts {accepted(dialect)}")


def _check_pragma(body: list[Token], dialect: Dialect) -> None:
    """``PRAGMA [schema.]name`` or ``PRAGMA [schema.]name(argument)``, only for a pragma that only reads."""
    rest = body[1:]
    if len(rest) >= 3 and rest[1].text == "." and rest[1].kind == "punct":
        rest = rest[2:]
    if not rest or rest[0].kind not in ("word", "ident"):
        raise _refuse("PRAGMA without a name", dialect)
    name, tail = rest[0].text, rest[1:]
    argument: str | None = None
    if len(tail) == 3 and tail[0].text == "(" and tail[2].text == ")" and tail[1].kind != "punct":
        argument = tail[1].text
    elif tail and tail[0].text == "=":
        raise _refuse(f"PRAGMA {name} = ... changes a setting", dialect)
    elif tail:
        raise _refuse(f"PRAGMA {name} is not in the accepted form PRAGMA name or PRAGMA name(table)", dialect)
    if not pragma_allowed(name, argument):
        raise _refuse(f"PRAGMA {name}{'' if argument is None else f'({argument})'} is not a read-only "
                      "informational pragma", dialect)


def _check_explain(body: list[Token], dialect: Dialect) -> None:
    """EXPLAIN [QUERY PLAN | VERBOSE | (options)] followed by a statement that is itself accepted."""
    i = 1
    if i < len(body) and body[i].text == "(":  # PostgreSQL's option list; ANALYZE in it is refused as a word
        while i < len(body) and body[i].text != ")":
            i += 1
        i += 1
    while i < len(body) and body[i].word() in ("query", "plan", "verbose"):
        i += 1
    inner = next((t.word() for t in body[i:] if t.text != "("), "")
    if inner not in _FIRST_KEYWORDS[dialect] - {"explain", "pragma"}:
        raise _refuse(f"EXPLAIN {inner.upper() or '(nothing)'} is not allowed", dialect)


def check_query(query: str, dialect: Dialect) -> str:
    """The statement's leading keyword (lower case) when ``query`` is one accepted statement; SqlRefused
    (SQL_NOT_ALLOWED) naming what is refused and what is accepted otherwise."""
    if not isinstance(query, str) or not query.strip():
        raise _refuse("the query is empty", dialect)
    tokens = tokenize(query, dialect)
    if not tokens:
        raise _refuse("the query holds nothing but comments", dialect)
    first_semicolon = next((k for k, t in enumerate(tokens) if t.kind == "punct" and t.text == ";"), len(tokens))
    trailing = tokens[first_semicolon:]
    if any(t.kind != "punct" or t.text != ";" for t in trailing):
        raise _refuse(f"several statements (a ';' at character {tokens[first_semicolon].pos + 1} is followed by "
                      "more SQL) are not allowed", dialect)
    body = tokens[:first_semicolon]
    first = next((t for t in body if t.kind != "punct" or t.text != "("), None)
    if first is None:
        raise _refuse("the query holds no statement", dialect)
    keyword = first.word()
    if keyword not in _FIRST_KEYWORDS[dialect]:
        raise _refuse(f"{first.text.upper()} statements are not allowed" if keyword else
                      f"a statement cannot start with {first.text!r}", dialect)
    if keyword == "pragma":
        _check_pragma(body, dialect)
    elif keyword == "explain":
        _check_explain(body, dialect)
    for k, token in enumerate(body):
        word = token.word()
        if word in _WRITE_WORDS:
            raise _refuse(f"{word.upper()} at character {token.pos + 1} writes, locks or runs a statement (if it "
                          f"is a column's name, quote it: \"{token.text}\")", dialect)
        if word == "share" and k and body[k - 1].word() in ("for", "key"):
            raise _refuse(f"FOR SHARE at character {token.pos + 1} locks rows", dialect)
        if token.kind in ("word", "ident") and function_denied(token.text):
            raise _refuse(f"{token.text} (at character {token.pos + 1}) is a function with side effects, "
                          "not allowed here", dialect)
    return keyword
