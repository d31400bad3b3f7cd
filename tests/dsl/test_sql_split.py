"""dsl.sql.split and can_push: which leaves SQL decides, which it only narrows (their Superset), and how a condition is
cut into the part SQL selects and the residual Python decides."""

from __future__ import annotations

from dsl.conditions import Not
from dsl.sql import Superset, can_push, split
from tests.dsl.sql_conditions import LABEL_LEAF, OPAQUE, SIMILAR_LEAF, TEXT_LEAF, C, all_, any_, none_


def test_can_push_stored_fields_and_labels_but_not_content_or_similarity():
    assert can_push(C("size", ">", 1)) and can_push(C("set", "=", "photos")) and can_push(C("exif.Model", "=", "x"))
    assert can_push(C("width", ">", 1)) and can_push(C("mime", "=", "x")) and can_push(C("duplicates", ">", 0))
    assert can_push(LABEL_LEAF) and can_push(C("label", "in", ["a", "b"])) and can_push(C("label", "!=", "a"))
    assert not can_push(TEXT_LEAF) and not can_push(SIMILAR_LEAF)


def test_split_a_top_level_all_child_by_child():
    a, b = C("size", ">", 10), C("set", "=", "photos")
    cond = all_(a, OPAQUE, b, all_(OPAQUE, C("depth", "<", 3)))
    pushed, rest = split(cond)
    assert pushed == all_(a, b, C("depth", "<", 3))
    assert rest == all_(OPAQUE, OPAQUE)


def test_split_sends_a_single_leaf_alone_not_wrapped():
    assert split(all_(C("size", ">", 10), OPAQUE)) == (C("size", ">", 10), OPAQUE)


def test_split_keeps_any_other_node_whole():
    mixed = any_(C("size", ">", 10), OPAQUE)
    assert split(mixed) == (None, mixed)
    assert split(Not(condition=all_(C("size", ">", 10), TEXT_LEAF))) == \
        (None, Not(condition=all_(C("size", ">", 10), TEXT_LEAF)))
    pure = any_(C("size", ">", 10), C("width", "<", 5))
    assert split(pure) == (pure, None)
    assert split(all_(OPAQUE, OPAQUE)) == (None, all_(OPAQUE, OPAQUE))
    assert split(all_()) == (all_(), None)


def test_split_keeps_content_leaves_for_python_and_narrows_sql_with_their_superset():
    a = C("size", ">", 10)
    cond = all_(a, TEXT_LEAF, all_(OPAQUE, C("depth", "<", 3)))
    pushed, rest = split(cond)
    assert pushed == Superset(all_(a, C("depth", "<", 3), TEXT_LEAF))
    assert rest == all_(TEXT_LEAF, OPAQUE)
    assert split(TEXT_LEAF) == (Superset(TEXT_LEAF), TEXT_LEAF)
    either = any_(a, TEXT_LEAF)  # a superset of each branch: SQL can still narrow
    assert split(either) == (Superset(either), either)
    assert split(any_(TEXT_LEAF, OPAQUE)) == (None, any_(TEXT_LEAF, OPAQUE))
    assert split(SIMILAR_LEAF) == (Superset(SIMILAR_LEAF), SIMILAR_LEAF)  # similarity narrows like text
    assert split(all_(a, LABEL_LEAF, SIMILAR_LEAF)) == (Superset(all_(a, LABEL_LEAF, SIMILAR_LEAF)), SIMILAR_LEAF)
    negated = Not(condition=TEXT_LEAF)  # true for entries without text: nothing to narrow by
    assert split(negated) == (None, negated)
    assert split(none_(TEXT_LEAF)) == (None, none_(TEXT_LEAF))
