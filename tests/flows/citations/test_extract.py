"""Physical resolution into the content cache: PDF pages, clips, crops and line ranges, reused while the source is
unchanged, and nothing half-written left when extraction fails; a cache on a full disk is NO_SPACE naming the cache
folder written to, never the source's EXTRACTION_FAILED."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Iterator

import pymupdf
import pytest
from PIL import Image, ImageOps

from examples import mediagen as media
from examples.mediagen import documents as documents_media
from flows.addresses.model import Address
from flows.citations.extract import extract, output_key
from flows.citations.model import SourceFacts
from store import cache
from store.errors import CitationError, NoSpace
from tests.small_disk import SmallDisk, small_disk

HASH = "xxh128:" + "1" * 32


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> dict[str, Path]:
    """One of each source, generated once: a 5-page PDF, a 4 s video (keyframe every second) named like an option,
    a 4 s MP3, a 100x100 PNG, a JPEG displayed rotated (EXIF orientation 6), a 10-line text file."""
    root = tmp_path_factory.mktemp("sources")
    return {
        "pdf": documents_media.pdf_with_outline(root / "book.pdf", pages=5),
        "video": media.video(root / "-i.mp4", seconds=4, size="160x120"),
        "audio": media.audio(root / "tone.mp3", seconds=4),
        "png": media.png(root / "square.png", size=(100, 100)),
        "rotated": media.jpeg(root / "rotated.jpg", size=(100, 50), orientation=6, gps=None),
        "text": media.text(root / "notes.txt", lines=10),
    }


@pytest.fixture()
def data_dir(tmp_path) -> Path:
    return tmp_path / "data"


def leftovers(data_dir: Path) -> list[Path]:
    """Temporary files left anywhere in the cache."""
    return list((data_dir / "cache").rglob(".tmp-*")) if (data_dir / "cache").exists() else []


def probe(path: Path) -> dict:
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration,format_name:stream=codec_type",
                          "-of", "json", str(path)], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


@pytest.mark.parametrize("pages, expected", [(((2, 3),), [2, 3]), (((1, 1), (3, 3)), [1, 3]),
                                             (((4, 4), (1, 2)), [4, 1, 2]), (None, [1, 2, 3, 4, 5])])
def test_pdf_pages_become_a_new_pdf_of_those_pages_in_the_order_asked(sources, data_dir, pages, expected):
    address = Address("doc", "book", pages=pages)
    out = extract(data_dir, str(sources["pdf"]), HASH, address, SourceFacts("document", page_count=5))
    assert out.cached is False and out.mime_type == "application/pdf" and out.cache_path.endswith(".pdf")
    assert out.path == data_dir / out.cache_path and out.size_bytes == out.path.stat().st_size
    with pymupdf.open(out.path) as doc:
        texts = [page.get_text() for page in doc]
    assert len(texts) == len(expected)
    for text, number in zip(texts, expected):
        assert documents_media.pdf_lines(number)[0] in text


def test_the_form_fields_of_a_form_pdf_come_with_its_pages(tmp_path, data_dir):
    source = tmp_path / "form.pdf"
    with pymupdf.open() as doc:
        for number in range(1, 4):
            page = doc.new_page()
            page.insert_text((72, 72), f"page {number}")
            field = pymupdf.Widget()
            field.field_name, field.field_type = f"name{number}", pymupdf.PDF_WIDGET_TYPE_TEXT
            field.rect, field.field_value = pymupdf.Rect(72, 100, 300, 120), f"value {number}"
            page.add_widget(field)
        doc.save(source)
    out = extract(data_dir, str(source), HASH, Address("doc", "form", pages=((2, 3),)),
                  SourceFacts("document", page_count=3))
    with pymupdf.open(out.path) as doc:
        assert [[w.field_value for w in page.widgets()] for page in doc] == [["value 2"], ["value 3"]]


def test_other_paged_formats_are_written_as_pdf(tmp_path, data_dir):
    source = documents_media.epub(tmp_path / "tiny.epub")
    with pymupdf.open(source) as doc:
        count = doc.page_count
    out = extract(data_dir, str(source), HASH, Address("doc", "tiny"), SourceFacts("document", page_count=count))
    with pymupdf.open(out.path) as doc:
        assert doc.is_pdf and doc.page_count == count
        assert "dragon sleeps" in "".join(page.get_text() for page in doc)


@pytest.mark.parametrize("name, bbox, size", [
    ("png", (0.2, 0.2, 0.8, 0.8), (60, 60)),
    ("png", None, (100, 100)),
    ("rotated", (0.0, 0.0, 1.0, 0.5), (50, 50)),  # displayed 50x100: fractions are of the upright image
])
def test_a_bbox_becomes_a_png_crop_of_the_image_as_displayed(sources, data_dir, name, bbox, size):
    out = extract(data_dir, str(sources[name]), HASH, Address("image", name, bbox=bbox), SourceFacts("image"))
    assert out.mime_type == "image/png" and out.cache_path.endswith(".png")
    with Image.open(out.path) as crop, Image.open(sources[name]) as original:
        assert crop.format == "PNG" and crop.size == size
        if name == "png":  # lossless: exactly the source's pixels
            box = (20, 20, 80, 80) if bbox else (0, 0, 100, 100)
            assert list(crop.convert("RGB").getdata()) == list(original.convert("RGB").crop(box).getdata())
        else:
            assert ImageOps.exif_transpose(original).size == (50, 100)


def test_a_crop_that_rounds_to_zero_pixels_is_an_invalid_address(sources, data_dir):
    address = Address("image", "square", bbox=(0.5, 0.5, 0.504, 0.9))
    with pytest.raises(CitationError) as err:
        extract(data_dir, str(sources["png"]), HASH, address, SourceFacts("image", width=100, height=100))
    assert err.value.code == "INVALID_ADDRESS" and "0x40 pixels" in err.value.message
    assert leftovers(data_dir) == [] and not list((data_dir / "cache").rglob("*.png"))


@pytest.mark.parametrize("exact", [False, True])
def test_a_video_clip_is_copied_from_the_keyframe_or_cut_exactly(sources, data_dir, exact):
    address = Address("video", "clip", t=(1.5, 3.0))
    out = extract(data_dir, str(sources["video"]), HASH, address, SourceFacts("video", duration=4.0), exact=exact)
    assert out.mime_type == "video/mp4" and out.cache_path.endswith(".mp4")
    info = probe(out.path)
    duration = float(info["format"]["duration"])
    assert {s["codec_type"] for s in info["streams"]} == {"video", "audio"}
    # exact: 1.5 s to 3 s; a stream copy: from the source's last keyframe at or before 1.5 s to 3 s
    first = 1.5 if exact else max(k for k in media.keyframe_times(sources["video"]) if k <= 1.5)
    # (the container also counts the last frame's length and the AAC encoder's padding: up to ~0.15 s)
    assert duration == pytest.approx(3.0 - first, abs=0.15)


def test_an_audio_clip_keeps_its_format_and_an_end_past_the_duration_is_the_end(sources, data_dir):
    address = Address("audio", "tone", t=(2.5, 60.0))
    out = extract(data_dir, str(sources["audio"]), HASH, address, SourceFacts("audio", duration=4.0))
    assert out.mime_type == "audio/mpeg" and out.cache_path.endswith(".mp3")
    info = probe(out.path)
    assert info["format"]["format_name"] == "mp3" and 1.3 <= float(info["format"]["duration"]) <= 1.7


def test_text_lines_are_cut_from_the_file_or_from_the_lines_given(sources, data_dir):
    address = Address("text", "notes", lines=(3, 5))
    out = extract(data_dir, str(sources["text"]), HASH, address, SourceFacts("text", line_count=10))
    assert out.mime_type == "text/plain; charset=utf-8"
    assert out.path.read_text("utf-8") == "".join(f"line {i}: the quick brown fox — café\n" for i in (2, 3, 4))
    asked = []
    given = extract(data_dir, str(sources["text"]), "xxh128:" + "2" * 32, address, SourceFacts("text", line_count=10),
                    text_lines=lambda first, last: asked.append((first, last)) or ["three", "four", "five"])
    assert asked == [(3, 5)] and given.path.read_text("utf-8") == "three\nfour\nfive\n"
    with pytest.raises(CitationError) as err:
        extract(data_dir, str(sources["text"]), HASH, Address("text", "notes", lines=(9, 12)),
                SourceFacts("text", line_count=10))
    assert err.value.code == "INVALID_ADDRESS" and "10 line(s)" in err.value.message


def test_the_same_extract_again_comes_from_the_cache_without_running_anything(sources, data_dir, monkeypatch):
    address = Address("video", "clip", t=(1.0, 2.0))
    facts = SourceFacts("video", duration=4.0)
    first = extract(data_dir, str(sources["video"]), HASH, address, facts)

    def refuse(*args, **kwargs):
        raise AssertionError("ffmpeg ran for a cached excerpt")

    monkeypatch.setattr(subprocess, "Popen", refuse)
    again = extract(data_dir, str(sources["video"]), HASH, Address("video", "renamed", t=(1.0, 2.0)), facts)
    assert again.cached is True and again.path == first.path and again.cache_path == first.cache_path
    assert again.size_bytes == first.size_bytes and again.mime_type == first.mime_type


def test_the_key_depends_on_the_content_the_fragment_and_exact_but_not_the_resource_id():
    address = Address("video", "talk", t=(2.0, 3.0))
    key = output_key(HASH, address, False)
    assert len(key) == 32 and int(key, 16) >= 0
    assert output_key(HASH, Address("video", "other-name", t=(2.0, 3.0)), False) == key
    assert len({key, output_key("xxh128:" + "3" * 32, address, False), output_key(HASH, address, True),
                output_key(HASH, Address("video", "talk", t=(2.0, 3.5)), False)}) == 4
    pages = Address("doc", "book", pages=((2, 3),))  # pages are exact either way: one file
    assert output_key(HASH, pages, True) == output_key(HASH, pages, False)


def test_every_excerpt_is_a_cache_path_served_with_its_mime_type(sources, data_dir):
    made = [extract(data_dir, str(sources["pdf"]), HASH, Address("doc", "b", pages=((1, 1),)),
                    SourceFacts("document", page_count=5)),
            extract(data_dir, str(sources["text"]), HASH, Address("text", "n", lines=(1, 2)),
                    SourceFacts("text", line_count=10)),
            extract(data_dir, str(sources["audio"]), HASH, Address("audio", "a", t=(0.0, 1.0)),
                    SourceFacts("audio", duration=4.0), exact=True)]
    for out in made:
        assert cache.is_cache_path(out.cache_path) and cache.resolve(data_dir, out.cache_path) == out.path
        assert cache.mime_type(out.cache_path) == out.mime_type != "application/octet-stream"


@pytest.mark.parametrize("make, address, facts, said", [
    (documents_media.truncated_pdf, Address("doc", "t", pages=((2, 3),)), SourceFacts("document", page_count=5),
     "broken PDF"),
    (documents_media.encrypted_pdf, Address("doc", "e", pages=((1, 1),)), SourceFacts("document", page_count=1),
     "password"),
    (media.corrupt_mp4, Address("video", "c", t=(0.0, 1.0)), SourceFacts("video", duration=4.0), "ffmpeg failed"),
])
def test_a_corrupt_source_fails_clearly_and_leaves_nothing_in_the_cache(tmp_path, data_dir, make, address, facts,
                                                                        said):
    source = make(tmp_path / ("source.mp4" if address.scheme == "video" else "source.pdf"))
    with pytest.raises(CitationError) as err:
        extract(data_dir, str(source), HASH, address, facts)
    assert err.value.code == "EXTRACTION_FAILED" and said in err.value.message
    assert err.value.message.startswith(address.format() + ": ")
    assert leftovers(data_dir) == []
    assert not [p for p in (data_dir / "cache").rglob("*") if p.is_file()]


def test_a_stream_copy_that_produced_no_frames_fails_suggesting_exact(sources, data_dir, monkeypatch):
    """A source with no keyframe at or before the start (an intra-refresh stream): ffmpeg's copy writes a file with
    headers and no frames, reported by its -progress output (faked here: real encoders always write a first
    keyframe, so ffmpeg copies from it)."""
    from flows.media import common

    def no_frames(cmd, *, timeout, what, writes_to=None):
        Path(cmd[-1].removeprefix("file:")).write_bytes(b"\x00" * 64)  # what a header-only output looks like
        return b"frame=0\nout_time_us=N/A\nprogress=end\n"

    monkeypatch.setattr(common, "run_tool", no_frames)
    with pytest.raises(CitationError) as err:
        extract(data_dir, str(sources["video"]), HASH, Address("video", "clip", t=(2.0, 3.0)),
                SourceFacts("video", duration=4.0))
    assert err.value.code == "EXTRACTION_FAILED" and "exact=true" in err.value.message
    assert leftovers(data_dir) == [] and not list((data_dir / "cache").rglob("*.mp4"))


# --- a cache on a full disk -----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def disk(tmp_path_factory) -> Iterator[SmallDisk]:
    with small_disk(tmp_path_factory.mktemp("cache-disk") / "disk", 4096) as mounted:
        yield mounted


@pytest.fixture(scope="module")
def big_sources(tmp_path_factory) -> dict[str, Path]:
    """Sources whose excerpts are ~1 MB, incompressible: a 700x500 noise PNG and a PDF page holding it."""
    root = tmp_path_factory.mktemp("big-sources")
    noise = Image.frombytes("RGB", (700, 500), os.urandom(700 * 500 * 3))
    noise.save(root / "noise.png", format="PNG")
    doc = pymupdf.open()
    page = doc.new_page()
    page.insert_image(page.rect, filename=str(root / "noise.png"))
    doc.save(root / "noise.pdf")
    doc.close()
    return {"png": root / "noise.png", "pdf": root / "noise.pdf"}


@pytest.fixture
def full_cache(disk: SmallDisk) -> Iterator[Path]:
    """A data dir whose cache's disk has ~64 KB free; given back empty and whole."""
    data = disk.path / "data"
    cache.cache_dir(data).mkdir(parents=True, exist_ok=True)
    disk.fill(64 * 1024)
    yield data
    disk.unfill()
    for path in sorted(data.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()


@pytest.mark.parametrize("what", ["pdf", "png", "text"])
def test_a_full_cache_disk_is_no_space_naming_the_cache_folder_and_leaves_nothing(what, sources, big_sources,
                                                                                 full_cache):
    lines = [os.urandom(1000).hex() for _ in range(100)]  # 200 KB of lines given by the documents capability
    source, address, facts = {
        "pdf": (big_sources["pdf"], Address("doc", "noise", pages=((1, 1),)), SourceFacts("document", page_count=1)),
        "png": (big_sources["png"], Address("image", "noise"), SourceFacts("image", width=700, height=500)),
        "text": (sources["text"], Address("text", "notes"), SourceFacts("text", line_count=100)),
    }[what]
    with pytest.raises(NoSpace) as raised:
        extract(full_cache, str(source), HASH, address, facts,
                text_lines=(lambda first, last: lines[first - 1:last]) if what == "text" else None)
    assert raised.value.code == "NO_SPACE" and f"the disk holding {cache.cache_dir(full_cache)}/" in str(raised.value)
    assert leftovers(full_cache) == [] and not [p for p in full_cache.rglob("*") if p.is_file()]


def test_ffmpeg_failing_on_a_full_cache_disk_is_no_space_naming_the_cache_folder(sources, data_dir, monkeypatch):
    """ffmpeg's run told where it writes: a run that ends saying the disk is full (a stand-in process here, as
    ffmpeg 5.1 ends some such runs with status 0) is NoSpace naming the clip's cache folder, not EXTRACTION_FAILED."""
    from flows.media import common

    real = common.run_tool

    def full(cmd, *, timeout, what, writes_to=None):
        said = "Error writing trailer of file:x.mp4: No space left on device"
        return real(["sh", "-c", f"echo '{said}' >&2; exit 1"], timeout=timeout, what=what, writes_to=writes_to)

    monkeypatch.setattr(common, "run_tool", full)
    with pytest.raises(NoSpace) as raised:
        extract(data_dir, str(sources["video"]), HASH, Address("video", "clip", t=(1.0, 2.0)),
                SourceFacts("video", duration=4.0))
    assert f"the disk holding {cache.cache_dir(data_dir)}/" in str(raised.value)
    assert leftovers(data_dir) == [] and not list((data_dir / "cache").rglob("*.mp4"))
