"""Video and audio from the ffmpeg binary's lavfi sources, and ffprobe's view of them.

- ``video``: ``testsrc`` (its frames differ over time: a counter and a moving pattern) with a sine tone; a title or
  container chapters, optionally black at the start; H.264 (MPEG-4 part 2 where this ffmpeg has no libx264) + AAC.
- ``scene_video``: visibly different sources one after another, each encoded alone and then joined (stream copy), so
  the cuts are at ``seconds_each * k``, each on a keyframe, and memory stays flat however long the video is.
- ``audio``: a sine tone with tags (format by extension), optionally with cover art; ``audio_with_silences``: tones
  separated by digital silence (``tone_spans`` says where they are).
- ``keyframe_times`` and ``duration_of``: what ffprobe reads back.

Every output is written with ``-fflags +bitexact``: the same arguments make the same bytes.
"""

from __future__ import annotations

import functools
import logging
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from .files import prepare

log = logging.getLogger(__name__)

FFMPEG = shutil.which("ffmpeg")
HAVE_FFMPEG = FFMPEG is not None and shutil.which("ffprobe") is not None


class MediaError(RuntimeError):
    """ffmpeg is missing or failed."""


def ffmpeg(*args: str) -> None:
    """Run the ffmpeg binary quietly (``-nostdin -y``); raises MediaError with its stderr when it fails."""
    if FFMPEG is None:
        raise MediaError("ffmpeg is not installed (./scripts/setup installs it)")
    cmd = [FFMPEG, "-hide_banner", "-loglevel", "error", "-nostdin", "-y", *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise MediaError(f"ffmpeg failed ({done.returncode}): {' '.join(cmd)}\n{done.stderr.strip()}")


@functools.cache
def _has_libx264() -> bool:
    if FFMPEG is None:
        return False
    return " libx264 " in subprocess.run([FFMPEG, "-hide_banner", "-encoders"], capture_output=True, text=True).stdout


def video_codec(*, preset: str = "ultrafast", crf: int | None = None, gop: int | None = None,
                threads: int | None = None) -> list[str]:
    """ffmpeg's output options for H.264 in yuv420p (libx264 ``preset``, ``crf``, a keyframe every ``gop`` frames,
    ``threads``: 1 for the same bytes on any machine), or MPEG-4 part 2 where libx264 is missing."""
    if not _has_libx264():
        return ["-c:v", "mpeg4", "-q:v", "8", "-pix_fmt", "yuv420p", *(["-g", str(gop)] if gop else [])]
    args = ["-c:v", "libx264", "-preset", preset]
    if crf is not None:
        args += ["-crf", str(crf)]
    args += ["-pix_fmt", "yuv420p"]
    if gop:
        args += ["-g", str(gop)]
    if threads:
        args += ["-threads", str(threads)]
    return args


def _escape(value: str) -> str:
    """A value in an ffmetadata file: '=', ';', '#', '\\' and newlines are escaped with a backslash."""
    out = value.replace("\\", "\\\\")
    for ch in "=;#\n":
        out = out.replace(ch, "\\" + ch)
    return out


def ffmetadata(title: str | None, chapters: Sequence[tuple[float, float, str]]) -> str:
    """An ffmetadata file: the title and the chapters ``(start s, end s, title)`` in milliseconds."""
    lines = [";FFMETADATA1"] + ([f"title={_escape(title)}"] if title else [])
    for start, end, name in chapters:
        lines += ["[CHAPTER]", "TIMEBASE=1/1000", f"START={int(round(start * 1000))}", f"END={int(round(end * 1000))}",
                  f"title={_escape(name)}"]
    return "\n".join(lines) + "\n"


def video(path: str | Path, *, seconds: float = 4, size: str = "320x240", rate: int = 25, audio: bool = True,
          tone: int = 440, title: str | None = "test video", chapters: Sequence[tuple[float, float, str]] | None = None,
          black_start: float = 0.0, keyframe_every: float | None = 1.0, preset: str = "ultrafast",
          crf: int | None = None, threads: int | None = None) -> Path:
    """An MP4 of ``testsrc`` with a sine tone of ``tone`` Hz (AAC, 64 kbit/s) when ``audio``; container chapters
    ``(start s, end s, title)`` or else a title tag; ``black_start`` seconds of black at the beginning; a keyframe
    every ``keyframe_every`` seconds (None: the encoder's default, 250 frames)."""
    path = prepare(path)
    src = f"testsrc=size={size}:rate={rate}:duration={seconds}"
    if black_start:
        src += f",drawbox=x=0:y=0:w=iw:h=ih:color=black:t=fill:enable='lt(t,{black_start})'"
    args = ["-f", "lavfi", "-i", src]
    maps = ["-map", "0:v"]
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency={tone}:sample_rate=44100:duration={seconds}"]
        maps += ["-map", "1:a"]
    gop = round(rate * keyframe_every) if keyframe_every else None
    codec = video_codec(preset=preset, crf=crf, gop=gop, threads=threads)
    if audio:
        codec += ["-c:a", "aac", "-b:a", "64k"]
    with tempfile.TemporaryDirectory(prefix="mediagen-") as tmp:
        if chapters:
            meta = Path(tmp) / "chapters.txt"
            meta.write_text(ffmetadata(title, chapters), encoding="utf-8")
            args += ["-f", "ffmetadata", "-i", str(meta)]
            index = str(2 if audio else 1)
            maps += ["-map_metadata", index, "-map_chapters", index]
        elif title:
            maps += ["-metadata", f"title={title}"]
        ffmpeg(*args, *maps, *codec, "-t", str(seconds), "-movflags", "+faststart", "-fflags", "+bitexact",
               "file:" + str(path))
    return path


def _lavfi(source: str, size: str, rate: int) -> str:
    """A lavfi video source at ``size`` and ``rate``; haldclutsrc (a fixed colour table, no size option) is scaled."""
    sep = ":" if "=" in source else "="
    if source.startswith("haldclutsrc"):
        return f"{source}{sep}rate={rate},scale={size.replace('x', ':')}"
    return f"{source}{sep}size={size}:rate={rate}"


def scene_video(path: str | Path, sources: Sequence[str], *, seconds_each: float, size: str = "160x120",
                rate: int = 25, gop: int | None = None, keyint_min: int | None = None,
                tones: Sequence[int] | None = None, contrast: bool = False, crf: int | None = None) -> Path:
    """An MP4 of ``sources`` (lavfi sources, e.g. "testsrc", "color=c=red", "gradients=speed=0.02"),
    ``seconds_each`` each, one after another: the cuts are at ``seconds_each * k``.

    Each segment is encoded alone (libx264 ultrafast, ``crf``) and starts on a keyframe, then has one every ``gop``
    frames (default: a second); with ``keyint_min`` the encoder may add keyframes at its own scene cuts, at least
    that many frames apart, else none. ``tones``: a sine tone per segment (Hz; AAC), else no audio. ``contrast``:
    segment i is hue-rotated by 67 i degrees and alternately bright (luma 128-255) and dark (0-102), so every cut
    scores well above a scene detector's threshold whatever the sources. The segments are joined with the concat
    demuxer (stream copy) from a temp folder beside ``path``."""
    path = prepare(path)
    gop = gop or rate
    with tempfile.TemporaryDirectory(prefix=".segments-", dir=path.parent) as tmp:
        parts = []
        for i, source in enumerate(sources):
            part = Path(tmp) / f"s{i:03d}.mp4"
            secs = f"{seconds_each:g}"
            args = ["-f", "lavfi", "-t", secs, "-i", _lavfi(source, size, rate)]  # -t: mandelbrot has no duration
            if tones:
                args += ["-f", "lavfi", "-t", secs, "-i", f"sine=frequency={tones[i % len(tones)]}:sample_rate=44100"]
            vf = "setsar=1,format=yuv420p"
            if contrast:
                luma = "128+val/2" if i % 2 == 0 else "val*0.4"
                vf += f",hue=h={(i * 67) % 360},lutyuv=y='{luma}'"
            keys = ["-keyint_min", str(keyint_min)] if keyint_min else ["-sc_threshold", "0"]
            audio = ["-c:a", "aac", "-b:a", "64k", "-shortest"] if tones else []
            ffmpeg(*args, "-vf", vf, *video_codec(crf=crf, gop=gop), *keys, *audio, "-fflags", "+bitexact",
                   "-f", "mp4", str(part))
            parts.append(part)
            log.info("video segment %d/%d", i + 1, len(sources))
        listing = Path(tmp) / "list.txt"
        listing.write_text("".join(f"file '{p}'\n" for p in parts))
        ffmpeg("-f", "concat", "-safe", "0", "-i", str(listing), "-c", "copy", "-map_chapters", "-1",
               "-movflags", "+faststart", "-fflags", "+bitexact", "-f", "mp4", "file:" + str(path))
    return path


def audio(path: str | Path, *, seconds: float = 3, tone: int = 660, sample_rate: int = 44100,
          channels: int | None = None, bitrate: str | None = None, title: str | None = "test tone",
          artist: str | None = "assay", cover: Path | None = None) -> Path:
    """A sine tone of ``tone`` Hz in the format of the extension (.mp3, .m4a, .ogg, .wav ...; the muxer's default
    encoder at ``bitrate``), with title and artist tags, optionally with cover art (an image file)."""
    path = prepare(path)
    args = ["-f", "lavfi", "-i", f"sine=frequency={tone}:sample_rate={sample_rate}:duration={seconds}"]
    maps = ["-map", "0:a"]
    if cover is not None:
        args += ["-i", "file:" + str(cover)]
        maps += ["-map", "1:v", "-c:v", "mjpeg", "-disposition:v", "attached_pic"]
        if path.suffix.lower() == ".mp3":
            maps += ["-id3v2_version", "3"]
    if channels:
        maps += ["-ac", str(channels)]
    if bitrate:
        maps += ["-b:a", bitrate]
    tags = [*(["-metadata", f"title={title}"] if title else []), *(["-metadata", f"artist={artist}"] if artist else [])]
    ffmpeg(*args, *maps, *tags, "-fflags", "+bitexact", "file:" + str(path))
    return path


def audio_with_silences(path: str | Path, tones: Sequence[float] = (1.5, 1.5, 1.5), gap: float = 1.0,
                        title: str | None = "Tones and silences") -> Path:
    """Audio (format by extension: .wav, .mp3, .m4a ...), mono, of sine tones of the given lengths (seconds; tone i
    at 440 + 110 i Hz) separated by ``gap`` seconds of digital silence: see ``tone_spans``."""
    path = prepare(path)
    args: list[str] = []
    labels = []
    for i, seconds in enumerate(tones):
        if i:
            args += ["-f", "lavfi", "-i", f"anullsrc=channel_layout=mono:sample_rate=44100:duration={gap}"]
            labels.append(f"[{len(labels)}:a]")
        args += ["-f", "lavfi", "-i", f"sine=frequency={440 + 110 * i}:sample_rate=44100:duration={seconds}"]
        labels.append(f"[{len(labels)}:a]")
    graph = "".join(labels) + f"concat=n={len(labels)}:v=0:a=1,aformat=channel_layouts=mono[out]"
    meta = ["-metadata", f"title={title}"] if title else []
    ffmpeg(*args, "-filter_complex", graph, "-map", "[out]", *meta, "-fflags", "+bitexact", "file:" + str(path))
    return path


def tone_spans(tones: Sequence[float] = (1.5, 1.5, 1.5), gap: float = 1.0) -> list[tuple[float, float]]:
    """Where ``audio_with_silences`` puts its tones: (start, end) seconds of each; tone i starts at
    ``sum(tones[:i]) + i * gap``."""
    spans, at = [], 0.0
    for seconds in tones:
        spans.append((at, at + seconds))
        at += seconds + gap
    return spans


def keyframe_times(path: str | Path) -> list[float]:
    """The presentation times (seconds) of the keyframes of the first video stream, as ffprobe reads them."""
    out = subprocess.run(["ffprobe", "-v", "error", "-select_streams", "v:0", "-skip_frame", "nokey",
                          "-show_entries", "frame=pts_time", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return sorted(float(line.split(",")[0]) for line in out.split() if line.strip())


def duration_of(path: str | Path) -> float:
    """The container's duration in seconds, as ffprobe reads it."""
    out = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "csv=p=0", str(path)],
                         capture_output=True, text=True, check=True).stdout
    return float(out.strip())
