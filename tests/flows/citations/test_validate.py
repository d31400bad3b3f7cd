"""Agent-supplied maps: a good tree becomes Nodes; a bad one is refused with every problem named by its node."""

from __future__ import annotations

import pytest

from flows.citations.model import MAX_NODES, SourceFacts
from flows.citations.validate import MAX_DEPTH, validate_nodes
from store.errors import CitationError

PDF = SourceFacts("document", page_count=5)
VIDEO = SourceFacts("video", duration=10.0)
IMAGE = SourceFacts("image", width=100, height=100)
TEXT = SourceFacts("text", line_count=40)


def doc(node_id, pages, **more):
    return {"id": node_id, "location": {"modality": "document", "pages": pages}, **more}


def problems(nodes, facts) -> list[dict]:
    with pytest.raises(CitationError) as info:
        validate_nodes(nodes, facts)
    assert info.value.code == "INVALID_MAP"
    found = info.value.details["problems"]
    assert info.value.message.startswith(f"{len(found)} problem{'s' if len(found) != 1 else ''} in the map: ")
    return found


def test_a_good_tree_becomes_nodes_with_defaults_and_no_virtual_address():
    nodes = validate_nodes([
        doc("ch1", [1, 3], title="One", summary="First", children=[
            doc("ch1.intro", [2], type=None, title=None),
            {"id": "ch1.fig", "type": "figure", "location": {"modality": "document", "pages": [3.0, 3],
                                                               "virtual_address": "doc://x#pages=3"}}]),
        doc("ch2", [4, 5], type="chapter"),
    ], PDF)
    assert [n.id for n in nodes] == ["ch1", "ch2"]
    ch1 = nodes[0]
    assert (ch1.title, ch1.summary, ch1.type, ch1.location.pages) == ("One", "First", "section", [1, 3])
    assert [(c.id, c.type, c.location.pages) for c in ch1.children] == [
        ("ch1.intro", "section", [2, 2]), ("ch1.fig", "figure", [3, 3])]
    assert all(n.location.virtual_address is None for top in nodes for n in top.walk())
    assert nodes[1].type == "chapter"


@pytest.mark.parametrize("facts, location, expected", [
    (VIDEO, {"modality": "video", "start": 0, "end": 10.4}, (0.0, 10.4)),  # an end slightly past: clamped later
    (IMAGE, {"modality": "image", "bbox": [0.2, 0.2, 0.8, 0.8]}, [0.2, 0.2, 0.8, 0.8]),
    (TEXT, {"modality": "text", "lines": [10, 20]}, [10, 20]),
])
def test_each_modality_takes_its_own_fields(facts, location, expected):
    [node] = validate_nodes([{"id": "n", "location": location}], facts)
    got = {"video": lambda: (node.location.start, node.location.end), "image": lambda: node.location.bbox,
           "text": lambda: node.location.lines}[facts.modality]()
    assert got == expected


def test_every_problem_of_a_map_is_reported_at_once_each_named_by_its_node():
    found = problems([
        doc("ch1", [1, 9], children=[doc("ch2.a", [1]), 5]),
        {"title": "no id", "location": {"modality": "document", "pages": [3, 2]}, "colour": "red"},
        doc("ch1", [1]),
        doc("a.b", [1]),
        {"id": "bad id!", "location": {"modality": "document", "pages": [1]}},
        {"id": "t", "title": 5, "summary": "x" * 5001, "type": "", "location": {"modality": "document"}},
        {"id": "v", "location": {"modality": "video", "start": 1, "end": 2}},
        {"id": "w", "location": {"modality": "document", "pages": [1], "start": 3, "zoom": 2}},
        {"id": "nl"},
        {"id": "p", "location": {"modality": "document", "pages": [0, 1.5, 2]}},
    ], PDF)
    by_node: dict[str, list[str]] = {}
    for p in found:
        by_node.setdefault(p["node"], []).append(p["problem"])
    expect = {
        "ch1": ["pages 1-9 are past the end: the document has 5 pages", "used by more than one node"],
        "ch2.a": ["not nested in its parent 'ch1'"],
        "nodes[0].children[1]": ["a node must be an object"],
        "nodes[1]": ["id missing", "unknown key 'colour'", "the range 3-2 ends before it starts"],
        "a.b": ["a top-level id has no dot"],
        "nodes[4]": ["id 'bad id!' is not usable"],
        "t": ["title must be a string", "summary is 5001 characters long; at most 5000", "type must be a short",
              "location.pages missing"],
        "v": ["location.modality is 'video'; this file is a document"],
        "w": ["location.start: not of a document", "unknown location key 'zoom'"],
        "nl": ["location missing"],
        "p": ["location.pages must be [first, last] or [n], whole numbers"],
    }
    assert set(by_node) == set(expect)
    for node, words in expect.items():
        text = " | ".join(by_node[node])
        for word in words:
            assert word in text, (node, word, text)
    assert len(found) == 18  # every problem above, none twice


def test_the_message_quotes_the_first_three_problems_and_counts_the_rest():
    with pytest.raises(CitationError) as info:
        validate_nodes([doc(f"n{i}", [9]) for i in range(5)], PDF)
    message = info.value.message
    assert message.startswith("5 problems in the map: n0: location.pages [9]: page 9 is past the end")
    assert "n2:" in message and "n3:" not in message and "(2 more in details.problems)" in message


@pytest.mark.parametrize("location, words", [
    ({"modality": "video", "start": 9, "end": 10.6}, "t ends at 10.6 s, past the end: the video lasts 10 s"),
    ({"modality": "video", "start": 10, "end": 10.2}, "t starts at 10 s, at or after the end"),
    ({"modality": "video", "start": 3, "end": 3}, "zero length"),
    ({"modality": "video", "start": 4, "end": 3}, "ends before it starts"),
    ({"modality": "video", "start": -1, "end": 3}, "before the beginning"),
    ({"modality": "video", "start": "0", "end": True}, "location.start and location.end must be a number"),
    ({"modality": "video", "end": 3}, "location.start missing"),
])
def test_times_are_checked_against_the_duration(location, words):
    [found] = problems([{"id": "n", "location": location}], VIDEO)
    assert found["node"] == "n" and words in found["problem"]


@pytest.mark.parametrize("bbox, words", [
    ([0.1, 0.2, 0.3], "four numbers x1,y1,x2,y2, not 3"),
    ([0.1, 0.2, 0.3, 0.4, 0.5], "not 5"),
    ([0.1, 0.2, 1.3, 0.4], "within 0-1"),
    ([0.5, 0.1, 0.4, 0.9], "zero area: x1 0.5 is not less than x2 0.4"),
    ([0.1, 0.5, 0.4, 0.5], "zero area: y1 0.5 is not less than y2 0.5"),
    ("0.1,0.2,0.3,0.4", "must be four numbers"),
    (None, "location.bbox missing"),
])
def test_an_image_node_is_a_region_with_a_valid_bbox(bbox, words):
    location = {"modality": "image"} if bbox is None else {"modality": "image", "bbox": bbox}
    [found] = problems([{"id": "r", "location": location}], IMAGE)
    assert words in found["problem"]


@pytest.mark.parametrize("pages", [[10 ** 400], [1, True], [], [1, 2, 3], "1-2", [float("inf")]])
def test_pages_that_are_not_one_or_two_whole_numbers_are_refused(pages):
    [found] = problems([doc("n", pages)], PDF)
    assert "location.pages must be [first, last] or [n], whole numbers" in found["problem"]


def test_lines_past_the_end_of_a_text_are_refused():
    [found] = problems([{"id": "s", "location": {"modality": "text", "lines": [30, 41]}}], TEXT)
    assert "lines 30-41 are past the end: the text has 40 lines" in found["problem"]


def test_a_map_deeper_than_the_limit_is_refused_once():
    root = cur = doc("n", [1])
    node_id = "n"
    for i in range(MAX_DEPTH + 5):
        node_id += f".c{i}"
        child = doc(node_id, [1])
        cur["children"] = [child]
        cur = child
    [found] = problems([root], PDF)
    assert f"deeper than {MAX_DEPTH} levels" in found["problem"]


def test_a_map_of_the_deepest_allowed_nesting_is_accepted():
    root = cur = doc("n", [1])
    node_id = "n"
    for i in range(MAX_DEPTH - 1):
        node_id += f".c{i}"
        child = doc(node_id, [1])
        cur["children"] = [child]
        cur = child
    [node] = validate_nodes([root], PDF)
    assert len(list(node.walk())) == MAX_DEPTH


def test_too_many_nodes_are_refused():
    found = problems([doc(f"n{i}", [1]) for i in range(MAX_NODES + 1)], PDF)
    assert found == [{"node": "nodes", "problem": f"the map has {MAX_NODES + 1} nodes; at most {MAX_NODES}"}]


@pytest.mark.parametrize("nodes, words", [
    ([], "the map has no nodes"),
    ({"id": "x"}, "nodes must be a list of node objects, not an object"),
])
def test_a_map_that_is_not_a_list_of_nodes_is_refused(nodes, words):
    [found] = problems(nodes, PDF)
    assert found["node"] == "nodes" and words in found["problem"]


def test_reference_003s_example_map_is_accepted_and_a_shown_map_can_be_supplied_back():
    reference = [
        {"id": "intro", "title": "Introduction", "type": "section",
         "location": {"modality": "video", "start": 0.0, "end": 145.5}, "summary": "Course overview and objectives",
         "children": [{"id": "intro.welcome", "title": "Welcome", "type": "example",
                       "location": {"modality": "video", "start": 0.0, "end": 30.0}, "children": []}]},
        {"id": "chapter_1", "title": "Big O Notation", "type": "section",
         "location": {"modality": "video", "start": 145.5, "end": 285.0}, "summary": "Asymptotic runtime analysis",
         "children": []},
    ]
    facts = SourceFacts("video", duration=285.0)
    nodes = validate_nodes(reference, facts)
    assert [n.id for top in nodes for n in top.walk()] == ["intro", "intro.welcome", "chapter_1"]
    shown = [n.dump() for n in nodes]
    for top in shown:  # as getStructure shows it: with addresses filled in
        top["location"]["virtual_address"] = "video://lecture_01#t=0-145.5"
    assert validate_nodes(shown, facts) == nodes
