"""Maps built locally (flows.citations.builders): the node trees and facts of generated sources whose structure is
known (tests/citations_media.py), the fallbacks, and the refusals."""

from __future__ import annotations

import shutil

import pytest

from examples import mediagen as media
from examples.mediagen import citations as cm
from examples.mediagen import documents as documents_media
from flows.citations.builders import scan, tree
from flows.citations.builders import build, probe
from flows.core.outcomes import Cancelled
from store.errors import CitationError, InvalidInput

pytestmark = pytest.mark.skipif(not media.HAVE_FFMPEG, reason="ffmpeg is not installed")


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    """The generated sources, made once for the module."""
    d = tmp_path_factory.mktemp("sources")
    return {
        "pdf": cm.pdf_outline(d / "book.pdf"),
        "md": cm.markdown_headings(d / "notes.md"),
        "chapters": cm.video_with_chapters(d / "lecture.mp4"),
        "scenes": cm.video_with_scenes(d / "-scenes.mp4"),  # a name ffmpeg would read as an option
        "silences": cm.audio_with_silences(d / "talk.wav"),
        "plain": cm.video_with_scenes(d / "plain.mp4", scenes=1, seconds_each=3),
    }


def _flat(built):
    return {n.id: n for root in built.nodes for n in root.walk()}


def test_pdf_outline_nests_entries_and_each_runs_to_the_next_at_its_level(src):
    built = build(str(src["pdf"]), "document")
    assert built.origin == "outline" and built.title == "Outlined Book"
    assert built.facts.page_count == 12
    nodes = _flat(built)
    assert {i: n.location.pages for i, n in nodes.items()} == cm.PDF_RANGES
    assert [c.id for c in nodes["chapter_2"].children] == ["chapter_2.method", "chapter_2.results"]
    assert nodes["chapter_2.method.details"].title == "Details" and nodes["chapter_1"].type == "section"


def test_pdf_windows_cover_every_page_and_the_last_is_shorter(src):
    built = build(str(src["pdf"]), "document", strategy="windows", window=5)
    assert built.origin == "windows"
    assert [(n.id, n.title, n.location.pages) for n in built.nodes] == [
        ("w1", "Pages 1-5", [1, 5]), ("w2", "Pages 6-10", [6, 10]), ("w3", "Pages 11-12", [11, 12])]


def test_pdf_without_outline_falls_back_to_windows_and_outline_is_refused(tmp_path):
    path = str(cm.pdf_outline(tmp_path / "flat.pdf", pages=3, toc=[], title=None))
    built = build(path, "document")
    assert built.origin == "windows" and built.title == "flat.pdf"
    assert [n.location.pages for n in built.nodes] == [[1, 3]]
    with pytest.raises(CitationError) as err:
        build(path, "document", strategy="outline")
    assert err.value.code == "UNSUPPORTED_FORMAT" and "no outline" in str(err.value)


def test_ids_are_slugs_of_titles_numbered_among_siblings(tmp_path):
    toc = [[1, "Part", 1], [2, "Notes", 1], [2, "Notes", 2], [1, "Part", 3], [1, "Ünïcode — ÷", 4],
           [1, "Ωμέγα", 4]]  # no ASCII left: the node type
    built = build(str(cm.pdf_outline(tmp_path / "dup.pdf", pages=4, toc=toc)), "document")
    assert list(_flat(built)) == ["part", "part.notes", "part.notes_2", "part_2", "unicode", "section"]


def test_markdown_headings_nest_with_line_ranges_and_fenced_hashes_are_not_headings(src):
    built = build(str(src["md"]), "text")
    assert built.origin == "headings" and built.title == "Alpha"
    assert built.facts.line_count == cm.MARKDOWN_LINES
    nodes = _flat(built)
    assert {i: (n.title, n.location.lines) for i, n in nodes.items()} == {
        i: (title, lines) for i, (title, _line, lines) in cm.MARKDOWN_HEADINGS.items()}


def test_text_windows_count_lines_as_the_documents_capability_does(tmp_path):
    path = tmp_path / "log.txt"
    path.write_bytes("".join(f"line {i}\r\n" for i in range(1, 121)).encode())  # CRLF, a final line end
    assert probe(str(path), "text").line_count == 120
    built = build(str(path), "text")
    assert built.origin == "windows" and built.title == "log.txt"
    assert [(n.id, n.title, n.location.lines) for n in built.nodes] == [
        ("w1", "Lines 1-50", [1, 50]), ("w2", "Lines 51-100", [51, 100]), ("w3", "Lines 101-120", [101, 120])]
    with pytest.raises(CitationError) as err:
        build(str(path), "text", strategy="headings")
    assert err.value.code == "UNSUPPORTED_FORMAT" and "windows" in str(err.value)


def test_text_extracted_by_the_caller_is_what_lines_count(tmp_path):
    page = tmp_path / "page.html"
    page.write_text("<html><body><h1>Title</h1><p>one</p><p>two</p></body></html>")
    text = "Title\none\ntwo\nthree"  # as the documents capability extracted it
    assert probe(str(page), "text", fmt="html", text=text).line_count == 4
    built = build(str(page), "text", fmt="html", text=text, window=3)
    assert [n.location.lines for n in built.nodes] == [[1, 3], [4, 4]]


def test_a_map_over_the_node_limit_is_coarsened_not_refused(tmp_path, monkeypatch):
    monkeypatch.setattr(tree, "MAX_NODES", 4)
    path = tmp_path / "long.txt"
    path.write_text("x\n" * 120)
    built = build(str(path), "text", strategy="windows", window=10)  # 12 windows > 4: 20 lines, then 40
    assert [n.location.lines for n in built.nodes] == [[1, 40], [41, 80], [81, 120]]


def test_video_chapters_come_from_the_container(src):
    facts = probe(str(src["chapters"]), "video")
    assert (facts.duration, facts.width, facts.height) == (5.0, 160, 120)
    assert dict(facts.extra)["chapters"] == 2 and dict(facts.extra)["has_audio"] is True
    built = build(str(src["chapters"]), "video")
    assert built.origin == "chapters" and built.title == "Chaptered video"
    assert [(n.id, n.title, n.type, n.location.start, n.location.end) for n in built.nodes] == [
        ("intro", "Intro", "chapter", 0.0, 2.0), ("main", "Main", "chapter", 2.0, 5.0)]
    as_audio = build(str(src["chapters"]), "audio")  # its sound track, cited as audio: the same chapters
    assert as_audio.origin == "chapters" and as_audio.facts.width is None
    assert [n.location.modality for n in as_audio.nodes] == ["audio", "audio"]


def test_scene_cuts_of_a_three_scene_video_are_found_near_the_true_cuts(src):
    built = build(str(src["scenes"]), "video")
    assert built.origin == "scenes"
    assert [n.id for n in built.nodes] == ["scene_1", "scene_2", "scene_3"]
    spans = [(n.location.start, n.location.end) for n in built.nodes]
    truth = [(0, 2), (2, 4), (4, 6)]
    for (start, end), (t0, t1) in zip(spans, truth):
        assert abs(start - t0) <= 0.2 and abs(end - t1) <= 0.2
    with pytest.raises(CitationError) as err:
        build(str(src["scenes"]), "video", strategy="chapters")
    assert err.value.code == "UNSUPPORTED_FORMAT" and "no chapters" in str(err.value)


def test_scene_cuts_look_only_between_differing_keyframes_and_find_what_a_full_pass_finds(src):
    path = str(src["scenes"])
    keys = scan._keyframe_changes(path, 60, lambda: False)  # a keyframe a second; the cuts are on 2 and 4
    assert [k for k, _ in keys] == [0, 1, 2, 3, 4, 5]
    assert scan._candidates(keys, 6.0) == [(1.0, 2.0), (3.0, 4.0)]
    assert scan.scene_cuts(path, duration=6.0, frame_rate=25) == sorted(scan._cuts_in(path, 0.3, 60, lambda: False))


def test_keyframes_too_dense_or_changing_too_often_mean_one_full_pass():
    dense = [(i * 0.04, 30.0) for i in range(50)]
    assert scan._candidates(dense, 2.0) is None
    busy = [(float(i), 0.0 if i % 4 else 20.0) for i in range(10)]  # 3 of 9 spans differ: a third of the time
    assert scan._candidates(busy, 10.0) == [(3.0, 4.0), (7.0, 8.0)]
    assert scan._candidates([(float(i), 20.0) for i in range(10)], 10.0) is None  # all of them


def test_audio_segments_are_the_sounds_between_silences(src):
    built = build(str(src["silences"]), "audio")
    assert built.origin == "silences" and built.title == "Tones and silences"
    assert [n.type for n in built.nodes] == ["segment"] * 3
    for node, (t0, t1) in zip(built.nodes, cm.tone_spans()):
        assert abs(node.location.start - t0) <= 0.15 and abs(node.location.end - t1) <= 0.15
    assert [n.id for n in build(str(src["silences"]), "audio", strategy="scenes").nodes] == \
        ["segment_1", "segment_2", "segment_3"]


def test_a_video_without_chapters_or_cuts_and_a_steady_tone_fall_back_to_windows(src, tmp_path):
    built = build(str(src["plain"]), "video", window=1)
    assert built.origin == "windows"
    assert [(n.id, n.title, n.location.start, n.location.end) for n in built.nodes] == [
        ("w1", "0:00-0:01", 0.0, 1.0), ("w2", "0:01-0:02", 1.0, 2.0), ("w3", "0:02-0:03", 2.0, 3.0)]
    tone = build(str(media.audio(tmp_path / "tone.mp3", seconds=3)), "audio", window=2)
    assert tone.origin == "windows" and tone.nodes[0].location.end == 2.0
    assert tone.nodes[-1].location.end == pytest.approx(tone.facts.duration, abs=1e-3)  # the last one shorter


def test_an_image_is_mapped_whole_with_its_displayed_size(tmp_path):
    path = str(media.jpeg(tmp_path / "photo.jpg", size=(80, 40), orientation=6))  # rotated: shown 40 x 80
    facts = probe(path, "image")
    assert (facts.width, facts.height) == (40, 80)
    built = build(path, "image")
    assert built.origin == "whole"
    assert [(n.id, n.type, n.location.bbox) for n in built.nodes] == [("image", "image", [0.0, 0.0, 1.0, 1.0])]
    with pytest.raises(CitationError) as err:
        build(path, "image", strategy="windows")
    assert err.value.code == "UNSUPPORTED_FORMAT" and "map-put" in str(err.value)


@pytest.mark.parametrize("key,modality,strategy,named", [("scenes", "video", "outline", "chapters, scenes"),
                                                         ("pdf", "document", "chapters", "outline, windows"),
                                                         ("md", "text", "scenes", "headings, windows")])
def test_a_strategy_that_does_not_apply_names_those_that_do(src, key, modality, strategy, named):
    with pytest.raises(CitationError) as err:
        build(str(src[key]), modality, strategy=strategy)
    assert err.value.code == "UNSUPPORTED_FORMAT" and named in str(err.value)


@pytest.mark.parametrize("window", [0, -5])
def test_a_window_that_is_not_positive_is_invalid_input(src, window):
    with pytest.raises(InvalidInput):
        build(str(src["md"]), "text", strategy="windows", window=window)


def test_corrupt_pdf_mp4_and_image_fail_naming_the_tool(tmp_path):
    pdf = str(documents_media.truncated_pdf(tmp_path / "cut.pdf"))
    mp4 = str(media.corrupt_mp4(tmp_path / "bad.mp4"))
    png = tmp_path / "bad.png"
    png.write_bytes(b"not a picture at all")
    for path, modality, tool in ((pdf, "document", "PyMuPDF"), (mp4, "video", "ffprobe"), (str(png), "image",
                                                                                             "Pillow")):
        for call in (probe, build):
            with pytest.raises(CitationError) as err:
                call(path, modality)
            assert err.value.code == "EXTRACTION_FAILED" and tool in str(err.value)


def test_a_cancelled_scan_stops(src, tmp_path):
    path = tmp_path / "copy.mp4"
    shutil.copy(src["plain"], path)
    with pytest.raises(Cancelled):
        build(str(path), "video", strategy="scenes", should_cancel=lambda: True)
