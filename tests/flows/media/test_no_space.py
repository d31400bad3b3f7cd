"""A full disk is told from a bad file (flows/media/common.py): ENOSPC / EDQUOT from the OS, ffmpeg's and MuPDF's
words for it, SQLite's passed on as text, become NoSpace (NO_SPACE), never a MediaError of the file; a file whose
name holds those words is still that file's error. On a real full tmpfs: ffmpeg's output, the timeline's frames in
a full temporary folder, and PyMuPDF saving a PDF."""

from __future__ import annotations

import errno
import tempfile
from pathlib import Path
from typing import Iterator

import pytest

from examples import mediagen as media
from flows.media import video
from flows.media.common import MediaError, is_full_disk, no_space, run_tool, says_full_disk, tool
from flows.media.pdf import load_pymupdf
from store.errors import NoSpace
from tests.small_disk import SmallDisk, small_disk

needs_ffmpeg = pytest.mark.skipif(not media.HAVE_FFMPEG, reason="ffmpeg and ffprobe are needed")


def _chained() -> BaseException:
    try:
        try:
            raise OSError(errno.ENOSPC, "No space left on device", "/data/cache/ab/.tmp-1.jpg")
        except OSError as exc:
            raise ValueError("the encoder stopped") from exc
    except ValueError as outer:
        return outer


@pytest.mark.parametrize("exc, full", [
    (OSError(errno.ENOSPC, "No space left on device"), True),
    (OSError(errno.EDQUOT, "Disk quota exceeded"), True),
    (NoSpace("the disk holding the store is full"), True),
    (RuntimeError("code=2: cannot fwrite: No space left on device"), True),  # MuPDF
    (RuntimeError("the index writer process failed: OperationalError: database or disk is full"), True),
    (_chained(), True),  # what a layer raised while handling ENOSPC
    (OSError(errno.EIO, "Input/output error"), False),
    (OSError(errno.ENOENT, "No such file or directory", "/x/a: no space left on device"), False),  # a name
    (MediaError("cannot open /x/no space left on device.pdf: broken PDF"), False),
    (MediaError("cannot identify image file (truncated or not an image)"), False),
])
def test_a_full_disk_is_told_from_a_bad_file(exc, full):
    assert is_full_disk(exc) is full
    made = no_space(exc, "/data/cache")
    assert (made is not None) is full
    if made is not None and not isinstance(exc, NoSpace):
        assert made.code == "NO_SPACE" and "/data/cache" in made.message and "free space" in made.message


def test_only_a_lines_end_says_the_disk_is_full():
    assert says_full_disk("[out#0/image2 @ 0x1] Error muxing\nav_interleaved_write_frame(): No space left on device\n"
                          "Conversion failed!")
    assert not says_full_disk("file:/x/no space left on device.mp4: Invalid data found when processing input")


@pytest.fixture(scope="module")
def disk(tmp_path_factory) -> Iterator[SmallDisk]:
    with small_disk(tmp_path_factory.mktemp("small") / "disk", 256) as mounted:
        yield mounted


@pytest.fixture
def full(disk: SmallDisk) -> Iterator[Path]:
    """The small disk with no space left; emptied again after the test."""
    disk.fill(0)
    yield disk.path
    for leftover in disk.path.iterdir():
        if leftover.is_file():
            leftover.unlink()
    disk.unfill()


@needs_ffmpeg
def test_ffmpeg_writing_to_a_full_disk_raises_no_space_naming_where(full):
    out = full / "frame.ppm"
    cmd = [tool("ffmpeg"), "-hide_banner", "-loglevel", "error", "-nostdin", "-f", "lavfi",
           "-i", "testsrc=size=640x480:rate=1", "-frames:v", "1", "-c:v", "ppm", "-f", "image2", "-update", "1",
           "-y", "file:" + str(out)]
    with pytest.raises(NoSpace, match="the disk holding .*small.* is full") as raised:
        run_tool(cmd, timeout=30, what="ffmpeg", writes_to=str(full))
    assert raised.value.code == "NO_SPACE"


def test_a_tool_that_exits_0_after_failing_to_close_its_output_on_a_full_disk_raises_no_space(tmp_path):
    # ffmpeg 5 does this: its output is cut short, so it must not be kept as a finished artifact
    cmd = ["sh", "-c", "echo 'Error closing file out.mp4: No space left on device' >&2; exit 0"]
    with pytest.raises(NoSpace, match=f"the disk holding {tmp_path} is full"):
        run_tool(cmd, timeout=30, what="ffmpeg", writes_to=str(tmp_path))


@needs_ffmpeg
def test_a_broken_file_named_like_a_full_disk_is_still_the_files_error(tmp_path):
    named = tmp_path / "x: No space left on device"
    named.write_bytes(b"not a video")
    cmd = [tool("ffprobe"), "-v", "error", "-show_format", "file:" + str(named)]
    with pytest.raises(MediaError, match="ffprobe failed"):
        run_tool(cmd, timeout=30, what="ffprobe")


@needs_ffmpeg
def test_a_timeline_whose_temporary_folder_is_full_raises_no_space(full, tmp_path, monkeypatch):
    clip = media.video(tmp_path / "clip.mp4", seconds=2, audio=False)
    info = video.probe(str(clip), 30)
    monkeypatch.setattr(tempfile, "tempdir", str(full))  # where TemporaryDirectory puts the frames
    with pytest.raises(NoSpace) as raised:
        video.timeline(str(clip), info, 3, 160, 120, 30)
    assert str(full) in raised.value.message
    assert [p.name for p in full.iterdir()] == [".filler"]  # the frames' folder went with the failure


def test_what_pymupdf_raises_when_its_pdf_does_not_fit_is_a_full_disk(full):
    pymupdf = load_pymupdf()
    doc = pymupdf.open()
    for page in range(8):
        doc.new_page().insert_text((50, 50), f"page {page} " + "0123456789abcdef" * 400)
    with pytest.raises(Exception) as raised:  # MuPDF's own class (FzErrorSystem): "cannot fwrite: No space ..."
        doc.save(str(full / "excerpt.pdf"), deflate=False)
    made = no_space(raised.value, full)
    assert made is not None and str(full) in made.message
