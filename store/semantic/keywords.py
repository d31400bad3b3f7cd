"""The words a keyword query over a collection's chunks looks for: a natural-language question becomes its distinct
words (letters and digits), English function words left out, so no query syntax from the caller reaches the engine
(flows.semantic.keywords ranks the chunks with them, from the text engine's line index).
"""

from __future__ import annotations

import re


MAX_QUERY_WORDS = 64  # distinct words of a keyword query at most (a 10,000-character query stays one small MATCH)
_WORD = re.compile(r"[^\W_]+")  # unicode letters and digits


# English function words: in an OR query each matches most chunks, so BM25 must score nearly all of them (0.6-0.9 s
# at 100,000 chunks for a question holding "the") while adding almost nothing to the ranking. PostgreSQL's
# to_tsquery('english', ...) drops the same kind of words itself.
STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below between both but
by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just me more most my myself no nor not now of off on once only or
other our ours ourselves out over own same she should so some such than that the their theirs them themselves then
there these they this those through to too under until up very was we were what when where which while who whom why
will with would you your yours yourself yourselves
""".split())


def query_words(query: str, limit: int = MAX_QUERY_WORDS) -> list[str]:
    """The distinct words (unicode letters and digits, lower-cased) of ``query`` in order, at most ``limit``, without
    English function words (``STOPWORDS``) unless the query holds nothing else ("to be or not to be")."""
    seen: dict[str, None] = {}
    common: dict[str, None] = {}
    for m in _WORD.finditer(query or ""):
        word = m.group(0).lower()
        (common if word in STOPWORDS else seen).setdefault(word, None)
        if len(seen) >= limit:
            break
    return list(seen) or list(common)[:limit]
