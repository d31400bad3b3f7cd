"""classify_file (flows/classify/worker.py): dispatch by kind, artifacts in the cache, per-operation errors, never
raising, on generated media and on every bad file."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
import xxhash
from PIL import Image

from examples import mediagen as media
from flows.classify.model import OPERATIONS, FileTask, Params
from flows.classify.worker import classify_file, kind_of
from store import cache
from store.entries import types_for

needs_ffmpeg = pytest.mark.skipif(not media.HAVE_FFMPEG, reason="ffmpeg and ffprobe are needed")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("corpus")
    media.jpeg(d / "photo.jpg", (1200, 900))
    media.text(d / "notes.md", lines=5)
    media.pdf(d / "guide.pdf", pages=2)
    media.empty(d / "empty.jpg")
    media.truncated_jpeg(d / "truncated.jpg")
    media.bomb_png(d / "bomb.png")
    media.encrypted_pdf(d / "locked.pdf")
    (d / "blob.bin").write_bytes(b"\x00\x01" * 100)
    if media.HAVE_FFMPEG:
        media.video(d / "clip.mp4", seconds=3)
        media.audio(d / "tone.mp3")
        media.audio(d / "sound_only.mp4")
        media.audio(d / "song.mp3", cover=media.jpeg(d / "cover.jpg", (300, 300)))
        media.corrupt_mp4(d / "corrupt.mp4")
    return d


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("data")


def task_for(path: Path, data_dir: Path, operations=OPERATIONS, **params) -> FileTask:
    ext = path.suffix.lower()
    media_type, mime = types_for(ext)
    size = path.stat().st_size if path.is_file() else 0
    return FileTask(entry_id=1, path=str(path), media_type=media_type, mime=mime, extension=ext, size=size,
                    operations=tuple(operations), params=Params(**{"timeout": 30.0, **params}),
                    cache_root=str(data_dir))


def run(corpus: Path, data_dir: Path, name: str, operations=OPERATIONS, **params):
    return classify_file(task_for(corpus / name, data_dir, operations, **params))


def test_a_photo_gets_a_thumbnail_in_the_cache_metadata_and_its_hash(corpus, data_dir):
    result = run(corpus, data_dir, "photo.jpg", max_width=200, max_height=200)
    assert result.done == OPERATIONS and result.errors == {}
    assert result.not_applicable == {"timeline": "timelines are made of videos only"}
    [thumb] = result.artifacts
    assert thumb.type == "thumbnail" and thumb.mime_type == "image/jpeg" and cache.is_cache_path(thumb.cache_path)
    with Image.open(cache.resolve(data_dir, thumb.cache_path)) as img:
        assert img.size == (thumb.value["width"], thumb.value["height"]) == (200, 150)
    assert result.metadata["exif.Model"] == "X-T4" and result.metadata["width"] == 1200
    assert result.hash == "xxh128:" + xxhash.xxh3_128_hexdigest((corpus / "photo.jpg").read_bytes())
    assert "hash" not in result.metadata  # it lives in entries.hash
    assert result.elapsed > 0


def test_only_the_requested_operations_run(corpus, data_dir):
    result = run(corpus, data_dir, "photo.jpg", operations=("metadata",))
    assert result.done == ("metadata",) and result.artifacts == [] and result.hash


def test_text_has_counts_and_no_thumbnail(corpus, data_dir):
    result = run(corpus, data_dir, "notes.md")
    assert result.not_applicable["thumbnail"] == "no thumbnail for text files"
    assert result.metadata["lines"] == 5 and result.metadata["encoding"] == "utf-8"
    assert result.done == OPERATIONS


def test_a_pdf_gets_its_first_page_and_its_pages(corpus, data_dir):
    result = run(corpus, data_dir, "guide.pdf")
    assert [a.type for a in result.artifacts] == ["thumbnail"]
    assert result.metadata["pages"] == 2 and result.details["kind"] == "pdf"


def test_an_unknown_kind_is_hashed_and_nothing_else_applies(corpus, data_dir):
    result = run(corpus, data_dir, "blob.bin")
    assert result.done == OPERATIONS and result.errors == {} and result.metadata == {}
    assert result.hash and result.details["size"] == 200


@needs_ffmpeg
def test_a_video_gets_a_thumbnail_a_spread_timeline_a_sheet_and_metadata(corpus, data_dir):
    result = run(corpus, data_dir, "clip.mp4", frame_count=4, max_width=160, max_height=160)
    assert result.errors == {} and result.done == OPERATIONS
    types = [a.type for a in result.artifacts]
    assert types == ["thumbnail"] + ["video-timeline"] * 4 + ["timeline-sheet"]
    frames = [a.value for a in result.artifacts if a.type == "video-timeline"]
    assert [f["frame"] for f in frames] == [0, 1, 2, 3]
    assert frames[0]["timestamp"] < 0.6 < 2.4 < frames[-1]["timestamp"]
    sheet = result.artifacts[-1].value
    assert (sheet["frames"], sheet["columns"], sheet["rows"]) == (4, 2, 2)
    assert all(cache.resolve(data_dir, a.cache_path) for a in result.artifacts)
    assert result.metadata["duration"] == pytest.approx(3.0, abs=0.1) and result.metadata["video_codec"] == "h264"


@needs_ffmpeg
def test_audio_without_cover_art_has_no_thumbnail_and_no_timeline(corpus, data_dir):
    result = run(corpus, data_dir, "tone.mp3")
    assert result.done == OPERATIONS and result.errors == {}
    assert set(result.not_applicable) == {"thumbnail", "timeline"} and result.metadata["audio_codec"] == "mp3"


@needs_ffmpeg
def test_audio_cover_art_is_its_thumbnail(corpus, data_dir):
    result = run(corpus, data_dir, "song.mp3", max_width=100, max_height=100)
    assert result.errors == {} and [a.type for a in result.artifacts] == ["thumbnail"]
    assert result.artifacts[0].value == {"width": 100, "height": 100}


@needs_ffmpeg
def test_a_video_file_holding_only_sound_is_treated_as_audio(corpus, data_dir):
    result = run(corpus, data_dir, "sound_only.mp4")
    assert result.errors == {} and result.done == OPERATIONS
    assert result.not_applicable == {"thumbnail": "no picture: sound only, without embedded cover art",
                                     "timeline": "no video stream (an audio file)"}
    assert result.metadata["audio_codec"] == "aac" and result.details["kind"] == "audio"


def test_an_empty_file_has_the_empty_hash_its_size_and_a_thumbnail_error(corpus, data_dir):
    result = run(corpus, data_dir, "empty.jpg")
    assert result.hash == "xxh128:" + xxhash.xxh3_128_hexdigest(b"")
    assert result.errors == {"thumbnail": "empty file"}
    assert result.metadata == {} and result.details["size"] == 0
    assert result.done == ("timeline", "metadata")


@pytest.mark.parametrize("name, operation, reason", [
    ("truncated.jpg", "thumbnail", "cannot decode image: image file is truncated"),
    ("bomb.png", "thumbnail", "image claims 50000x50000 pixels, over the 178,956,970-pixel limit"),
    ("bomb.png", "metadata", "image claims 50000x50000 pixels"),
    ("locked.pdf", "metadata", "encrypted PDF: needs a password"),
    pytest.param("corrupt.mp4", "timeline", "corrupt or not a media file (ffprobe: ", marks=needs_ffmpeg),
])
def test_bad_media_is_that_operations_short_error_and_the_rest_goes_on(corpus, data_dir, name, operation, reason):
    result = run(corpus, data_dir, name)
    assert result.errors[operation].startswith(reason)
    assert "Traceback" not in result.errors[operation] and len(result.errors[operation]) < 300
    assert result.hash  # the content hash is made even when the content cannot be decoded
    assert operation not in result.done


def test_a_fifo_is_not_a_regular_file_and_is_never_opened(tmp_path, data_dir):
    stuck = media.fifo(tmp_path / "stuck.mp4")
    result = classify_file(task_for(stuck, data_dir))  # opening it would block: the test would hang
    assert result.done == ()
    assert set(result.errors) == set(OPERATIONS)
    assert all("not a regular file" in reason for reason in result.errors.values())


def test_a_missing_file_is_an_error_not_an_exception(tmp_path, data_dir):
    result = classify_file(task_for(tmp_path / "gone.jpg", data_dir))
    assert set(result.errors) == set(OPERATIONS) and "cannot read the file" in result.errors["metadata"]


@pytest.mark.parametrize("name", media.HOSTILE_NAMES)
def test_hostile_names_are_classified_and_nothing_is_executed(tmp_path, data_dir, name):
    if name.endswith(".mp4"):
        if not media.HAVE_FFMPEG:
            pytest.skip("ffmpeg is needed")
        path = media.video(tmp_path / name, seconds=2, audio=False, title=None)
    else:
        path = media.jpeg(tmp_path / name, (320, 240))
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        result = classify_file(task_for(path, data_dir, frame_count=2))
    finally:
        os.chdir(cwd)
    assert result.errors == {} and result.done == OPERATIONS
    assert sorted(os.listdir(tmp_path)) == [name]  # no "pwned", nothing else made beside it


@pytest.mark.parametrize("media_type, ext, mime, kind", [
    ("image", ".jpg", "image/jpeg", "image"),
    ("document", ".pdf", "application/pdf", "pdf"),
    (None, ".heic", None, "image"),
    (None, ".mkv", None, "video"),
    (None, "", "audio/flac", "audio"),
    ("text", ".py", "text/x-python", "text"),
    ("document", ".docx", None, "other"),
    ("image", ".svg", "image/svg+xml", "other"),
])
def test_kind_comes_from_media_type_then_extension_then_mime(media_type, ext, mime, kind):
    task = FileTask(1, "/x" + ext, media_type, mime, ext, 1, OPERATIONS, Params(), "/tmp")
    assert kind_of(task) == kind


def test_identical_thumbnails_are_stored_once(corpus, data_dir):
    first = run(corpus, data_dir, "photo.jpg", operations=("thumbnail",))
    again = run(corpus, data_dir, "photo.jpg", operations=("thumbnail",))
    assert first.artifacts[0].cache_path == again.artifacts[0].cache_path
    data = cache.resolve(data_dir, first.artifacts[0].cache_path).read_bytes()
    assert Image.open(io.BytesIO(data)).format == "JPEG"


@needs_ffmpeg
def test_a_ts_file_that_is_a_transport_stream_is_classified_as_video_not_text(tmp_path, data_dir):
    stream = tmp_path / "recording.ts"
    media.ffmpeg("-f", "lavfi", "-i", "testsrc=size=160x120:rate=10:duration=2", "-c:v", "mpeg2video",
                 "-f", "mpegts", "file:" + str(stream))
    script = tmp_path / "app.ts"
    script.write_text("const answer: number = 42;\n")
    video_result = classify_file(task_for(stream, data_dir, frame_count=2))
    assert video_result.errors == {} and video_result.metadata["video_codec"] == "mpeg2video"
    assert "lines" not in video_result.metadata
    text_result = classify_file(task_for(script, data_dir))
    assert text_result.metadata["lines"] == 1 and text_result.metadata["words"] == 5
