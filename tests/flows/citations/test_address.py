"""Citation addresses: the grammar's accepted forms (reference 003's examples among them), every refusal naming its
problem and column, the canonical round trip, and the check against a source's facts."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, strategies as st

from flows.addresses.model import RESOURCE_ID_PATTERN, Address
from flows.citations.address import check_address, parse_address
from flows.citations.model import SourceFacts
from store.errors import CitationError


@pytest.mark.parametrize("text, expected", [
    # reference 003's examples
    ("doc://b#pages=12-13", Address("doc", "b", pages=((12, 13),))),
    ("video://l#t=00:03:12-00:03:40", Address("video", "l", t=(192.0, 220.0))),
    ("video://lecture_01#t=145-200", Address("video", "lecture_01", t=(145.0, 200.0))),
    ("doc://textbook#pages=12-15", Address("doc", "textbook", pages=((12, 15),))),
    # page lists
    ("doc://x#pages=1,3,7", Address("doc", "x", pages=((1, 1), (3, 3), (7, 7)))),
    ("doc://x#pages=1-3,7", Address("doc", "x", pages=((1, 3), (7, 7)))),
    ("doc://x#pages=4", Address("doc", "x", pages=((4, 4),))),
    # times: seconds, MM:SS, HH:MM:SS, decimals
    ("video://v#t=192-230", Address("video", "v", t=(192.0, 230.0))),
    ("video://v#t=03:12-3:50", Address("video", "v", t=(192.0, 230.0))),
    ("video://v#t=00:03:12.5-00:03:40", Address("video", "v", t=(192.5, 220.0))),
    ("video://v#t=1:00:00-1:00:30.25", Address("video", "v", t=(3600.0, 3630.25))),
    ("audio://talk#t=10.5-20", Address("audio", "talk", t=(10.5, 20.0))),
    ("image://d#bbox=0.2,0.2,0.8,0.8", Address("image", "d", bbox=(0.2, 0.2, 0.8, 0.8))),
    ("image://d#bbox=0,.25,1,1", Address("image", "d", bbox=(0.0, 0.25, 1.0, 1.0))),
    ("text://notes#lines=10-20", Address("text", "notes", lines=(10, 20))),
    ("text://notes#lines=7", Address("text", "notes", lines=(7, 7))),
    # no fragment: the whole resource; ids with dots and dashes, and ids spelled like keys or schemes
    ("doc://textbook", Address("doc", "textbook")),
    ("video://my.talk-2024_v2", Address("video", "my.talk-2024_v2")),
    ("video://t#t=1-2", Address("video", "t", t=(1.0, 2.0))),
    ("doc://pages#pages=1", Address("doc", "pages", pages=((1, 1),))),
    ("DOC://x#pages=1", Address("doc", "x", pages=((1, 1),))),
])
def test_addresses_of_every_form_parse(text, expected):
    address = parse_address(text)
    assert address == expected
    assert address.whole == (text.find("#") < 0)


def test_a_time_is_kept_to_the_millisecond_so_the_parse_is_canonical():
    address = parse_address("video://v#t=1.23456-2")
    assert address.t == (1.235, 2.0)
    assert address.format() == "video://v#t=1.235-2"


@pytest.mark.parametrize("text, column, words", [
    ("foo://x", 1, ["unknown scheme 'foo'", "doc://, video://, audio://, image://, text://"]),
    ("doc:/x", 4, ["expected '://' after the scheme"]),
    ("doc://x#t=1-2", 9, ["a doc:// address takes pages=", "not t="]),
    ("video://x#pages=1", 11, ["a video:// address takes t=START-END"]),
    ("image://x#lines=1-2", 11, ["an image:// address takes bbox="]),
    ("text://x#bbox=0,0,1,1", 10, ["a text:// address takes lines="]),
    ("doc://x#page=1", 9, ["unknown fragment 'page'", "pages=FIRST-LAST"]),
    ("doc://x#", 9, ["expected a fragment after '#'"]),
    ("image://d#bbox=0.1,0.2,0.3", 16, ["four numbers", "not 3"]),
    ("image://d#bbox=0.1,0.2,0.3,0.4,0.5", 16, ["four numbers", "not 5"]),
    ("image://d#bbox=0.1,0.2,1.3,0.4", 16, ["within 0-1", "1.3 is not"]),
    ("image://d#bbox=0.5,0.2,0.5,0.4", 16, ["zero area", "x1 0.5 is not less than x2 0.5"]),
    ("image://d#bbox=0.1,0.5,0.3,0.4", 16, ["zero area", "y1 0.5 is not less than y2 0.4"]),
    ("video://v#t=20-10", 16, ["ends before it starts"]),
    ("video://v#t=10-10", 16, ["zero length"]),
    ("video://v#t=1:75-2:00", 13, ["seconds must be below 60"]),
    ("video://v#t=5", 14, ["ends too soon", "expected '-'"]),
    ("doc://x#pages=0", 15, ["page 0 does not exist"]),
    ("doc://x#pages=5-3", 15, ["the range 5-3 ends before it starts"]),
    ("text://x#lines=0-3", 16, ["line 0 does not exist"]),
    ("doc://x#pages=1,,2", 17, ["unexpected ','", "expected a whole number"]),
    ("doc://x#pages=1-2abc", 18, ["unexpected 'a' after the fragment"]),
    ("doc://x#pages=1-2 ", 18, ["unexpected ' ' after the fragment"]),
    ("doc://a/b", 8, ["unexpected '/' in the resource id"]),
    ("doc://-x", 7, ["expected a resource id"]),
    ("doc://" + "a" * 200, 7, ["at most 128 characters"]),
    ("doc://" + "a" * 2000, 2001, ["at most 2000 characters"]),
])
def test_bad_addresses_are_refused_naming_the_column_and_the_problem(text, column, words):
    with pytest.raises(CitationError) as info:
        parse_address(text)
    err = info.value
    assert err.code == "INVALID_ADDRESS"
    assert err.details["column"] == column
    assert f"at column {column}:" in err.message
    for word in words:
        assert word in err.message


@pytest.mark.parametrize("text", ["", "   ", None])
def test_an_empty_address_is_refused(text):
    with pytest.raises(CitationError, match="the address is empty") as info:
        parse_address(text)
    assert info.value.code == "INVALID_ADDRESS"


_ID = st.builds(lambda head, tail: head + tail, st.sampled_from("aZ09"), st.text("aZ09_.-", max_size=12))


@st.composite
def addresses(draw) -> Address:
    """Every shape of address, with values as the canonical text can hold them (times to the millisecond)."""
    rid = draw(_ID)
    kind = draw(st.sampled_from(["whole", "pages", "video", "audio", "bbox", "lines"]))
    if kind == "whole":
        return Address(draw(st.sampled_from(["doc", "video", "audio", "image", "text"])), rid)
    if kind == "pages":
        spans = draw(st.lists(st.tuples(st.integers(1, 9999), st.integers(0, 50)), min_size=1, max_size=5))
        return Address("doc", rid, pages=tuple((a, a + d) for a, d in spans))
    if kind in ("video", "audio"):
        start = draw(st.integers(0, 10_000_000))
        end = start + draw(st.integers(1, 10_000_000))
        return Address(kind, rid, t=(start / 1000, end / 1000))
    if kind == "bbox":
        x1, y1 = draw(st.integers(0, 999)), draw(st.integers(0, 999))
        x2, y2 = draw(st.integers(x1 + 1, 1000)), draw(st.integers(y1 + 1, 1000))
        x1, y1, x2, y2 = x1 / 1000, y1 / 1000, x2 / 1000, y2 / 1000
        return Address("image", rid, bbox=(x1, y1, x2, y2))
    first = draw(st.integers(1, 100_000))
    return Address("text", rid, lines=(first, first + draw(st.integers(0, 1000))))


@given(addresses())
def test_the_canonical_text_parses_back_to_the_same_address(address):
    assert parse_address(address.format()) == address


@given(st.text(alphabet="docvideoaudiomagtxlns:/#=-,.0123456789 ", max_size=40))
def test_any_text_parses_or_is_refused_as_an_invalid_address(text):
    try:
        address = parse_address(text)
    except CitationError as err:
        assert err.code == "INVALID_ADDRESS"
    else:
        assert parse_address(address.format()) == address


@given(st.text(alphabet="aZ09_.-/: é", min_size=1, max_size=140))
def test_a_resource_id_is_accepted_exactly_when_it_matches_the_model_s_pattern(rid):
    try:
        address = parse_address(f"text://{rid}")
    except CitationError:
        assert not re.fullmatch(RESOURCE_ID_PATTERN, rid)
    else:
        assert address.resource_id == rid and re.fullmatch(RESOURCE_ID_PATTERN, rid)


# --- against the source ---------------------------------------------------------------------------------------

PDF = SourceFacts("document", page_count=5)
VIDEO = SourceFacts("video", duration=240.0, width=160, height=120)
TEXT = SourceFacts("text", line_count=12)
IMAGE = SourceFacts("image", width=100, height=100)


@pytest.mark.parametrize("text, facts", [
    ("doc://b#pages=2-3", PDF), ("doc://b#pages=1,5", PDF), ("doc://b", PDF),
    ("video://v#t=0-240", VIDEO), ("video://v#t=230-240.5", VIDEO),  # an end slightly past is clamped later
    ("text://n#lines=12", TEXT), ("image://i#bbox=0.2,0.2,0.8,0.8", IMAGE),
    ("doc://b#pages=99", SourceFacts("document")),  # extents unknown: not checked
])
def test_addresses_that_fit_their_source_pass(text, facts):
    check_address(parse_address(text), facts)


@pytest.mark.parametrize("text, facts, words", [
    ("doc://b#pages=7-9", PDF, ["pages 7-9 are past the end: the document has 5 pages"]),
    ("doc://b#pages=1,6", PDF, ["page 6 is past the end: the document has 5 pages"]),
    ("text://n#lines=10-20", TEXT, ["lines 10-20 are past the end: the text has 12 lines"]),
    ("video://v#t=240-250", VIDEO, ["t starts at 240 s, at or after the end: the video lasts 240 s"]),
    ("video://v#t=200-241", VIDEO, ["t ends at 241 s, past the end: the video lasts 240 s"]),
    ("video://x#t=1-2", PDF, ["x is a document; cite it as doc://x#pages=FIRST-LAST"]),
    ("doc://x#pages=1", VIDEO, ["x is a video; cite it as video://x#t=START-END"]),
    ("audio://x#t=1-2", VIDEO, ["x is a video"]),
    ("image://i#bbox=0.5,0.5,0.505,0.9", IMAGE, ["less than a pixel wide: the image is 100 px wide"]),
])
def test_addresses_that_do_not_fit_their_source_are_refused_naming_the_extent(text, facts, words):
    with pytest.raises(CitationError) as info:
        check_address(parse_address(text), facts)
    assert info.value.code == "INVALID_ADDRESS"
    for word in words:
        assert word in info.value.message


@pytest.mark.parametrize("address, words", [
    (Address("video", "v", t=(5.0, 5.0)), "zero length"),
    (Address("image", "i", bbox=(0.3, 0.1, 0.3, 0.9)), "zero area"),
    (Address("doc", "b", pages=((3, 2),)), "ends before it starts"),
    (Address("video", "v", t=(float("nan"), 5.0)), "finite"),
])
def test_a_built_address_is_checked_for_its_own_shape_too(address, words):
    facts = {"video": VIDEO, "image": IMAGE, "doc": PDF}[address.scheme]
    with pytest.raises(CitationError, match=words):
        check_address(address, facts)
