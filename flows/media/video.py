"""Video and audio through the ffmpeg binaries: ffprobe metadata, a representative thumbnail frame, a timeline of
frames spread over the whole duration, and audio cover art.

Every call gets ``file:`` + the absolute path (a name like ``-i.mp4`` is never an option), runs without a shell, has a
timeout after which the process is killed, and returns small outputs only: one frame scaled by ffmpeg to the box,
through a pipe; the timeline's frames, scaled, into a temporary directory. Seeking is by fast input seek (``-ss``
before ``-i``): no video is decoded from its start.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from PIL import Image, ImageDraw, ImageStat

from flows.media.common import MediaError, encode_jpeg, image_from_bytes, input_path, run_tool, tool

THUMBNAIL_FRAMES = 30  # frames ffmpeg's `thumbnail` filter compares to pick a representative one
DARK = 18.0  # mean luma under which a frame counts as black: another point is tried
SEEK_POINTS = (0.10, 0.30, 0.50)  # fractions of the duration tried for a thumbnail, in order
# inputs (frames) per ffmpeg command: every input is a demuxer and a decoder in memory at once, so a timeline of
# hundreds of frames runs as a few commands rather than one enormous one (the default 5 frames are one command)
MAX_INPUTS = 32


@dataclass
class Probe:
    """What ffprobe said about a file, and the bits the extractors need."""

    data: dict[str, Any]

    @property
    def streams(self) -> list[dict[str, Any]]:
        return self.data.get("streams") or []

    @property
    def format(self) -> dict[str, Any]:
        return self.data.get("format") or {}

    @property
    def duration(self) -> float | None:
        for source in [self.format, *self.video_streams]:
            value = _number(source.get("duration"))
            if value and value > 0:
                return value
        return None

    @property
    def video_streams(self) -> list[dict[str, Any]]:
        """Real video streams (a cover picture attached to an audio file is not one)."""
        return [s for s in self.streams if s.get("codec_type") == "video" and not _attached(s)]

    @property
    def audio_streams(self) -> list[dict[str, Any]]:
        return [s for s in self.streams if s.get("codec_type") == "audio"]

    @property
    def cover_stream(self) -> dict[str, Any] | None:
        return next((s for s in self.streams if s.get("codec_type") == "video" and _attached(s)), None)


def _attached(stream: dict[str, Any]) -> bool:
    return bool((stream.get("disposition") or {}).get("attached_pic"))


def _number(value: Any) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def frame_rate(value: Any) -> float | None:
    """``"30000/1001"`` -> 29.97; None for ``"0/0"``."""
    if not value or not isinstance(value, str):
        return None
    num, _, den = value.partition("/")
    try:
        rate = float(num) / float(den or 1)
    except (ValueError, ZeroDivisionError):
        return None
    return round(rate, 3) if rate > 0 and math.isfinite(rate) else None


def probe(path: str, timeout: float) -> Probe:
    """ffprobe's JSON for ``path`` (format, streams, chapters), or MediaError (not media, timed out)."""
    cmd = [tool("ffprobe"), "-v", "error", "-print_format", "json", "-show_format", "-show_streams",
           "-show_chapters", input_path(path)]
    try:
        out = run_tool(cmd, timeout=timeout, what="ffprobe")
    except MediaError as exc:
        said = str(exc)
        if said.startswith("ffprobe failed: "):
            reason = said.removeprefix("ffprobe failed: ")
            raise MediaError(f"corrupt or not a media file (ffprobe: {reason})") from None
        raise
    try:
        data = json.loads(out.decode("utf-8", "replace") or "{}")
    except ValueError:
        raise MediaError("ffprobe gave no readable answer") from None
    if not data.get("streams"):
        raise MediaError("ffprobe found no audio or video stream (corrupt or not a media file)")
    return Probe(data)


def metadata(info: Probe) -> tuple[dict[str, Any], dict[str, Any]]:
    """(flat, details) from a probe: duration, width, height, fps, codecs, bitrate, channels, sample_rate, format,
    chapters (count), ``tag.<name>`` for the container's tags, ``title`` / ``author`` from title / artist."""
    fmt = info.format
    flat: dict[str, Any] = {}
    duration = info.duration
    if duration is not None:
        flat["duration"] = round(duration, 3)
    video = info.video_streams[0] if info.video_streams else None
    audio = info.audio_streams[0] if info.audio_streams else None
    if video:
        for key in ("width", "height"):
            if isinstance(video.get(key), int) and video[key] > 0:
                flat[key] = video[key]
        fps = frame_rate(video.get("avg_frame_rate")) or frame_rate(video.get("r_frame_rate"))
        if fps:
            flat["fps"] = fps
        if video.get("codec_name"):
            flat["video_codec"] = video["codec_name"]
    if audio:
        if audio.get("codec_name"):
            flat["audio_codec"] = audio["codec_name"]
        if isinstance(audio.get("channels"), int):
            flat["channels"] = audio["channels"]
        sample_rate = _number(audio.get("sample_rate"))
        if sample_rate:
            flat["sample_rate"] = int(sample_rate)
    bitrate = _number(fmt.get("bit_rate"))
    if bitrate:
        flat["bitrate"] = int(bitrate)
    if fmt.get("format_name"):
        flat["format"] = fmt["format_name"]
    chapters = info.data.get("chapters") or []
    flat["chapters"] = len(chapters)
    tags = {str(k).lower(): str(v).replace("\x00", "").strip()[:500] for k, v in (fmt.get("tags") or {}).items()}
    for name, value in tags.items():
        if value:
            flat[f"tag.{name}"] = value
    if tags.get("title"):
        flat["title"] = tags["title"]
    author = tags.get("artist") or tags.get("author") or tags.get("album_artist")
    if author:
        flat["author"] = author
    details = {
        "kind": "video" if video else "audio", **{k: v for k, v in flat.items() if not k.startswith("tag.")},
        "tags": tags,
        "container": {k: fmt.get(k) for k in ("format_name", "format_long_name", "duration", "bit_rate", "nb_streams")},
        "streams": [{k: s.get(k) for k in ("index", "codec_type", "codec_name", "profile", "width", "height",
                                           "pix_fmt", "avg_frame_rate", "sample_rate", "channels", "channel_layout",
                                           "bit_rate", "duration") if s.get(k) is not None}
                    | {"attached_pic": _attached(s)} for s in info.streams],
        "chapters": [{"start": _number(c.get("start_time")), "end": _number(c.get("end_time")),
                      "title": (c.get("tags") or {}).get("title")} for c in chapters],
    }
    return flat, details


def _scale(max_width: int, max_height: int) -> str:
    """ffmpeg filter: fit into the box, aspect kept (square pixels), never upscaled."""
    return (f"scale=w='min({max_width},iw)':h='min({max_height},ih)':force_original_aspect_ratio=decrease"
            ",setsar=1")


def _frame_at(path: str, seconds: float | None, vf: str, timeout: float, stream: str = "0:v:0") -> Image.Image:
    """One frame (after ``vf``) from ``seconds`` on (None: no seek), through a pipe as PPM."""
    seek = [] if seconds is None else ["-ss", f"{max(seconds, 0):.3f}"]
    out = run_tool([tool("ffmpeg"), "-hide_banner", "-loglevel", "error", "-nostdin", *seek, "-i", input_path(path),
                    "-map", stream, "-an", "-sn", "-dn",
                    "-vf", vf, "-frames:v", "1", "-f", "image2pipe", "-c:v", "ppm", "pipe:1"],
                   timeout=timeout, what="ffmpeg")
    return image_from_bytes(out, "ffmpeg")


def _dark(img: Image.Image) -> bool:
    return ImageStat.Stat(img.convert("L")).mean[0] < DARK


def thumbnail(path: str, info: Probe, max_width: int, max_height: int, quality: int,
              timeout: float) -> tuple[bytes, int, int]:
    """A representative frame as a JPEG within the box: from ~10% into the video, ffmpeg's ``thumbnail`` filter
    picks the most typical of a few dozen frames; a frame that is still black makes it try 30%, then 50%."""
    if not info.video_streams:
        raise MediaError("no video stream")
    duration = info.duration or 0.0
    vf = f"{_scale(max_width, max_height)},thumbnail=n={THUMBNAIL_FRAMES}"  # histograms of small frames
    img = None
    deadline = time.monotonic() + timeout  # the retries share one timeout
    for n, fraction in enumerate(SEEK_POINTS if duration else (0.0,)):
        left = deadline - time.monotonic()
        if n and left <= 0:
            break
        try:
            img = _frame_at(path, duration * fraction, vf, max(left, 0.1))
        except MediaError:
            if img is None:
                raise
            break  # a later point failed: the darker frame already made will do
        if not _dark(img):
            break
    if img is None:
        raise MediaError("ffmpeg produced no frame")
    return encode_jpeg(img, quality), img.width, img.height


def cover_art(path: str, info: Probe, max_width: int, max_height: int, quality: int,
              timeout: float) -> tuple[bytes, int, int] | None:
    """The embedded cover picture of an audio file as a JPEG within the box, or None when it has none."""
    cover = info.cover_stream
    if cover is None:
        return None
    img = _frame_at(path, None, _scale(max_width, max_height), timeout, stream=f"0:{int(cover['index'])}")
    return encode_jpeg(img, quality), img.width, img.height


def timestamps(duration: float, count: int) -> list[float]:
    """``count`` points spread evenly over ``duration``: the middle of each of ``count`` equal slices."""
    return [round(duration * (i + 0.5) / count, 3) for i in range(count)]


def timeline(path: str, info: Probe, count: int, max_width: int, max_height: int,
             timeout: float) -> list[tuple[float, Image.Image]]:
    """``count`` frames spread over the whole duration, each scaled to the box, with their timestamps; ONE ffmpeg
    command (per MAX_INPUTS frames) with one fast-seeking input per frame, each frame written to a temporary file."""
    if not info.video_streams:
        raise MediaError("no video stream")
    duration = info.duration
    if not duration:
        raise MediaError("unknown duration: cannot spread frames over it")
    count = max(1, int(count))
    points = timestamps(duration, count)
    scale = _scale(max_width, max_height)
    frames: list[tuple[float, Image.Image]] = []
    with tempfile.TemporaryDirectory(prefix="assay-timeline-") as tmp:
        for start in range(0, count, MAX_INPUTS):
            frames += _extract(path, points[start:start + MAX_INPUTS], scale, tmp, timeout)
    if not frames:
        raise MediaError("ffmpeg produced no timeline frame")
    return frames


def _extract(path: str, points: list[float], scale: str, tmp: str, timeout: float) -> list[tuple[float, Image.Image]]:
    """The frames at ``points`` with one ffmpeg command: an input per point with its own fast seek, an output each."""
    cmd = [tool("ffmpeg"), "-hide_banner", "-loglevel", "error", "-nostdin", "-y"]
    for t in points:
        cmd += ["-ss", f"{t:.3f}", "-i", input_path(path)]
    outputs = [os.path.join(tmp, f"{i:04d}.ppm") for i in range(len(points))]
    for i, out in enumerate(outputs):
        cmd += ["-map", f"{i}:v:0", "-an", "-sn", "-dn", "-vf", scale, "-frames:v", "1", "-c:v", "ppm",
                "-f", "image2", "-update", "1", "file:" + out]
    run_tool(cmd, timeout=timeout, what="ffmpeg", writes_to=tmp)  # a full disk there: NoSpace, not the file's error
    frames = []
    for t, out in zip(points, outputs):
        if not os.path.exists(out) or os.path.getsize(out) == 0:
            continue  # a seek past the last frame of a badly indexed file: the other frames still count
        with Image.open(out) as img:
            img.load()
            frames.append((t, img.copy()))
        os.unlink(out)
    return frames


def format_time(seconds: float) -> str:
    whole = int(seconds)
    h, rest = divmod(whole, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def contact_sheet(frames: list[tuple[float, Image.Image]]) -> tuple[Image.Image, int, int]:
    """The frames on a grid (about square), each with its timestamp in a corner; (image, columns, rows)."""
    columns = max(1, math.ceil(math.sqrt(len(frames))))
    rows = math.ceil(len(frames) / columns)
    cell_w = max(img.width for _, img in frames)
    cell_h = max(img.height for _, img in frames)
    gap = 4
    sheet = Image.new("RGB", (columns * cell_w + (columns + 1) * gap, rows * cell_h + (rows + 1) * gap), (24, 24, 24))
    draw = ImageDraw.Draw(sheet)
    for i, (t, img) in enumerate(frames):
        x = gap + (i % columns) * (cell_w + gap) + (cell_w - img.width) // 2
        y = gap + (i // columns) * (cell_h + gap) + (cell_h - img.height) // 2
        sheet.paste(img.convert("RGB"), (x, y))
        label = format_time(t)
        box = draw.textbbox((x + 4, y + 4), label)
        draw.rectangle((box[0] - 2, box[1] - 2, box[2] + 2, box[3] + 2), fill=(0, 0, 0))
        draw.text((x + 4, y + 4), label, fill=(255, 255, 255))
    return sheet, columns, rows


def timeline_jpegs(frames: list[tuple[float, Image.Image]], quality: int) -> list[tuple[float, bytes, int, int]]:
    return [(t, encode_jpeg(img, quality), img.width, img.height) for t, img in frames]
