"""Video and audio (flows/media/video.py) with the real ffmpeg/ffprobe on generated media."""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest
from PIL import Image, ImageChops, ImageStat

from examples import mediagen as media
from flows.media import common, video
from flows.media.common import MediaError

pytestmark = pytest.mark.skipif(not media.HAVE_FFMPEG, reason="ffmpeg and ffprobe are needed")
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def files(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("av")
    cover = media.jpeg(d / "cover.jpg", (400, 400))
    return {
        "video": media.video(d / "clip.mp4", seconds=6, chapters=[(0, 3, "Intro"), (3, 6, "Outro")],
                             title="Alpine birds"),
        "black_start": media.video(d / "black.mp4", seconds=4, audio=False, black_start=1.0, title=None),
        "wide": media.video(d / "wide.mp4", seconds=2, size="640x360", audio=False),
        "song": media.audio(d / "song.mp3", cover=cover, title="Morning", artist="The Larks"),
        "tone": media.audio(d / "tone.m4a", title="tone", artist="assay"),
        "corrupt": media.corrupt_mp4(d / "corrupt.mp4"),
    }


@pytest.fixture(scope="module")
def probes(files):
    return {name: video.probe(str(files[name]), TIMEOUT) for name in ("video", "black_start", "wide", "song", "tone")}


def decode(data: bytes) -> Image.Image:
    img = Image.open(io.BytesIO(data))
    img.load()
    return img


def test_metadata_of_a_video_has_duration_size_rate_codecs_tags_and_chapters(probes):
    flat, details = video.metadata(probes["video"])
    assert flat["duration"] == pytest.approx(6.0, abs=0.1)
    assert (flat["width"], flat["height"]) == (320, 240)
    assert flat["fps"] == pytest.approx(25.0)
    assert flat["video_codec"] == "h264" and flat["audio_codec"] == "aac"
    assert flat["channels"] == 1 and flat["sample_rate"] == 44100
    assert isinstance(flat["bitrate"], int) and flat["bitrate"] > 0
    assert "mp4" in flat["format"]
    assert flat["chapters"] == 2 and [c["title"] for c in details["chapters"]] == ["Intro", "Outro"]
    assert details["chapters"][1]["start"] == pytest.approx(3.0)
    assert flat["title"] == flat["tag.title"] == "Alpine birds"
    assert all(key == key.lower() for key in flat if key.startswith("tag."))
    import json
    json.dumps(details)


def test_metadata_of_audio_has_no_video_fields_and_takes_author_from_artist(probes):
    flat, details = video.metadata(probes["song"])
    assert flat["audio_codec"] == "mp3" and flat["duration"] == pytest.approx(3.0, abs=0.2)
    assert "width" not in flat and "video_codec" not in flat  # the cover picture is not a video stream
    assert flat["title"] == "Morning" and flat["author"] == "The Larks"
    assert details["kind"] == "audio"


def test_video_thumbnail_fits_the_box_and_keeps_the_aspect(files, probes):
    data, width, height = video.thumbnail(str(files["wide"]), probes["wide"], 160, 160, 80, TIMEOUT)
    assert decode(data).size == (width, height) == (160, 90)


def test_video_thumbnail_is_not_the_black_opening(files, probes):
    data, *_ = video.thumbnail(str(files["black_start"]), probes["black_start"], 320, 320, 80, TIMEOUT)
    assert ImageStat.Stat(decode(data).convert("L")).mean[0] > 40


def test_timeline_timestamps_are_spread_evenly_over_the_whole_duration(files, probes):
    frames = video.timeline(str(files["video"]), probes["video"], 5, 160, 160, TIMEOUT)
    stamps = [t for t, _ in frames]
    duration = probes["video"].duration
    assert len(stamps) == 5
    assert stamps[0] < 0.2 * duration and stamps[-1] > 0.8 * duration
    gaps = [b - a for a, b in zip(stamps, stamps[1:])]
    assert max(gaps) - min(gaps) < 0.01 and min(gaps) > 0
    assert all(img.size == (160, 120) for _, img in frames)


def test_timeline_frames_differ_in_content(files, probes):
    frames = video.timeline(str(files["video"]), probes["video"], 4, 160, 160, TIMEOUT)
    pictures = [img.convert("RGB") for _, img in frames]
    for a, b in zip(pictures, pictures[1:]):
        diff = ImageStat.Stat(ImageChops.difference(a, b)).mean
        assert sum(diff) > 1.0  # testsrc changes over time: equal frames would mean the same point was taken


def test_timeline_is_one_ffmpeg_command(files, probes, monkeypatch):
    calls = []
    real = video.run_tool
    monkeypatch.setattr(video, "run_tool", lambda cmd, **kw: calls.append(cmd) or real(cmd, **kw))
    video.timeline(str(files["video"]), probes["video"], 6, 160, 160, TIMEOUT)
    assert len(calls) == 1 and calls[0].count("-ss") == 6


def test_contact_sheet_puts_the_frames_on_a_grid(files, probes):
    frames = video.timeline(str(files["video"]), probes["video"], 5, 160, 160, TIMEOUT)
    sheet, columns, rows = video.contact_sheet(frames)
    assert (columns, rows) == (3, 2)
    assert sheet.width >= 3 * 160 and sheet.height >= 2 * 120


def test_timestamps_are_the_middles_of_equal_slices():
    assert video.timestamps(10.0, 5) == [1.0, 3.0, 5.0, 7.0, 9.0]


def test_audio_cover_art_becomes_the_thumbnail(files, probes):
    data, width, height = video.cover_art(str(files["song"]), probes["song"], 100, 100, 80, TIMEOUT)
    assert decode(data).size == (width, height) == (100, 100)


def test_audio_without_cover_art_has_no_thumbnail(files, probes):
    assert video.cover_art(str(files["tone"]), probes["tone"], 100, 100, 80, TIMEOUT) is None


def test_corrupt_mp4_is_a_short_error(files):
    with pytest.raises(MediaError, match=r"^corrupt or not a media file \(ffprobe: .+\)$"):
        video.probe(str(files["corrupt"]), TIMEOUT)


def test_ffprobe_on_a_fifo_is_killed_at_its_timeout(tmp_path):
    stuck = media.fifo(tmp_path / "stuck.mp4")
    with pytest.raises(MediaError, match=r"^ffprobe timed out after 0.5 s$"):
        video.probe(str(stuck), 0.5)


@pytest.mark.parametrize("name", [n for n in media.HOSTILE_NAMES if n.endswith(".mp4")])
def test_hostile_file_names_are_read_as_files_never_as_options_or_commands(tmp_path, name):
    path = media.video(tmp_path / name, seconds=2, audio=False, title=None)
    info = video.probe(str(path), TIMEOUT)
    assert video.metadata(info)[0]["duration"] == pytest.approx(2.0, abs=0.1)
    video.thumbnail(str(path), info, 64, 64, 80, TIMEOUT)
    assert len(video.timeline(str(path), info, 2, 64, 64, TIMEOUT)) == 2
    assert sorted(os.listdir(tmp_path)) == [name]  # nothing named "pwned" (or anything else) was made
    assert not Path("pwned").exists()


def test_input_path_is_an_absolute_file_url():
    assert common.input_path("-i.mp4") == "file:" + os.path.abspath("-i.mp4")


def test_a_long_timeline_runs_as_a_few_commands_and_keeps_its_order(files, probes, monkeypatch):
    monkeypatch.setattr(video, "MAX_INPUTS", 3)
    calls = []
    real = video.run_tool
    monkeypatch.setattr(video, "run_tool", lambda cmd, **kw: calls.append(cmd) or real(cmd, **kw))
    frames = video.timeline(str(files["video"]), probes["video"], 7, 64, 64, TIMEOUT)
    assert len(calls) == 3 and [t for t, _ in frames] == video.timestamps(probes["video"].duration, 7)
