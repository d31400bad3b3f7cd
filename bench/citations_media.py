"""The citations benchmark's media: a long PDF with a nested outline and a long 720p video with scene cuts, generated
once into a cache dir and reused by later runs.

    media = ensure_media(Path("/tmp/assay-bench-citations"), MediaSpec.full())

- ``<work>/media-<spec key>/book.pdf``: ``pages`` pages (PyMuPDF), each with a heading and a few paragraphs of text,
  and a nested outline: ``chapters`` chapters, each with ``sections`` sections, each with ``subsections``
  subsections (full: 20 x 2 x 6, so 20 + 40 + 240 = 300 entries over 300 pages), the subsections spread over their
  chapter's pages.
- ``<work>/media-<spec key>/lecture.mp4``: ``segments`` segments of ``segment_seconds`` seconds each (full: 30 x 20 s
  = 10 minutes at 1280x720, 25 fps), each a different lavfi test pattern (testsrc2, SMPTE bars, a colour table,
  gradients...), hue-rotated and alternately bright and dark so each cut is plain to a scene detector, with a tone of
  its own; libx264 ultrafast (crf 28: ~0.6 Mbit/s, a lecture's rate) with a keyframe every ``gop`` frames (full: 125
  = 5 s) and one at each cut (every segment starts with one), AAC audio. Each segment is encoded alone, then the
  segments are joined with ffmpeg's concat demuxer (stream copy), so memory stays flat.

Every file is written beside its final name and renamed, so a file that exists is complete; a manifest records the
spec and the generation time (reported by the benchmark). Nothing is downloaded. The makers are examples/mediagen's
(``pdfs.write_pdf``, ``av.scene_video``; shared with the tests and the example corpus); this module says what to make.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from examples.mediagen import av
from examples.mediagen.files import atomic
from examples.mediagen.pdfs import Box, Line, write_pdf

log = logging.getLogger("bench.citations_media")

# lavfi sources cycled through the segments (haldclutsrc, a fixed 512x512 colour table, is scaled to the size)
# (tried and left out: sierpinski and cellauto, whose own motion scores as scene cuts; life, 36 Mbit/s at 720p)
PATTERNS = ("testsrc2", "smptehdbars", "haldclutsrc=level=8", "rgbtestsrc", "gradients=speed=0.02", "smptebars",
            "testsrc", "pal100bars", "yuvtestsrc", "colorspectrum")
VERSION = 3  # of the generated media: a change of patterns or encoding makes new files
WORDS = ("evidence citation outline section chapter lecture figure table theorem proof method result sample "
         "measure source archive address region interval keyframe page extract summary claim reader").split()


@dataclass(frozen=True)
class MediaSpec:
    pages: int = 300
    chapters: int = 20
    sections: int = 2
    subsections: int = 6
    segments: int = 30
    segment_seconds: int = 20
    size: str = "1280x720"
    fps: int = 25
    gop: int = 125

    @classmethod
    def full(cls) -> "MediaSpec":
        return cls()

    @classmethod
    def quick(cls) -> "MediaSpec":
        """Seconds to make: a 20-page PDF with a 14-entry outline, a 20-second 320x240 video with 5 cuts."""
        return cls(pages=20, chapters=2, sections=2, subsections=2, segments=6, segment_seconds=4, size="320x240",
                   fps=25, gop=50)

    @property
    def outline_entries(self) -> int:
        return self.chapters * (1 + self.sections * (1 + self.subsections))

    @property
    def duration(self) -> int:
        return self.segments * self.segment_seconds

    @property
    def key(self) -> str:
        return (f"v{VERSION}-{self.pages}p-{self.outline_entries}o-{self.duration}s-{self.size}-{self.fps}fps"
                f"-g{self.gop}-{self.segment_seconds}seg")


@dataclass
class Media:
    folder: Path
    pdf: Path
    video: Path
    spec: MediaSpec
    manifest: dict


def outline(spec: MediaSpec) -> list[list]:
    """The PDF's table of contents as PyMuPDF's ``set_toc`` takes it: ``[level, title, page]`` rows, pre-order."""
    per_chapter = spec.pages // spec.chapters
    leaves = spec.sections * spec.subsections
    toc = []
    for c in range(spec.chapters):
        first = c * per_chapter + 1
        toc.append([1, f"Chapter {c + 1}", first])
        for s in range(spec.sections):
            for u in range(spec.subsections):
                k = s * spec.subsections + u
                page = first + k * per_chapter // leaves
                if u == 0:
                    toc.append([2, f"Section {c + 1}.{s + 1}", page])
                toc.append([3, f"Subsection {c + 1}.{s + 1}.{u + 1}", page])
    return toc


def _paragraph(seed: int, words: int = 60) -> str:
    return " ".join(WORDS[(seed * 7 + i * 13 + i * i) % len(WORDS)] for i in range(words)).capitalize() + "."


def make_pdf(path: Path, spec: MediaSpec) -> None:
    """``spec.pages`` A4 pages of text (a heading and three paragraphs each) with the nested outline."""
    pages = [[Line(f"Page {p + 1}", (72, 90), 18), Box("\n\n".join(_paragraph(p * 3 + i) for i in range(3)),
                                                       (72, 120, 523, 780))] for p in range(spec.pages)]
    meta = {"title": "The citation benchmark's book", "author": "bench/citations_media.py"}
    atomic(path, lambda tmp: write_pdf(tmp, pages, toc=outline(spec), metadata=meta, compact=True))


def make_video(path: Path, spec: MediaSpec) -> None:
    """The segments (``av.scene_video``): pattern i of PATTERNS (cycled), hue-rotated and alternately bright and dark
    (``contrast``), a tone of its own (220 + 40 i Hz); libx264 crf 28 with a keyframe every ``gop`` frames, at each
    cut, and wherever x264 sees a scene cut at least two seconds after the last."""
    sources = [PATTERNS[i % len(PATTERNS)] for i in range(spec.segments)]
    atomic(path, lambda tmp: av.scene_video(
        tmp, sources, seconds_each=spec.segment_seconds, size=spec.size, rate=spec.fps, gop=spec.gop,
        keyint_min=min(spec.gop, 2 * spec.fps), tones=[220 + 40 * i for i in range(spec.segments)], contrast=True,
        crf=28))


def ensure_media(work: Path, spec: MediaSpec) -> Media:
    """The PDF and the video of ``spec`` under ``work`` (generated when missing); the manifest says how long each
    took to make when it was made, and ``generated_now`` which ones this call made."""
    folder = work / f"media-{spec.key}"
    folder.mkdir(parents=True, exist_ok=True)
    pdf, video, manifest_path = folder / "book.pdf", folder / "lecture.mp4", folder.parent / f"manifest-{spec.key}.json"
    manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {"spec": asdict(spec)}
    manifest["generated_now"] = []
    if not pdf.exists():
        started = time.perf_counter()
        make_pdf(pdf, spec)
        manifest["pdf_seconds"] = time.perf_counter() - started
        manifest["generated_now"].append("pdf")
        log.info("PDF: %d pages, %d outline entries in %.1f s", spec.pages, spec.outline_entries,
                 manifest["pdf_seconds"])
    if not video.exists():
        started = time.perf_counter()
        make_video(video, spec)
        manifest["video_seconds"] = time.perf_counter() - started
        manifest["generated_now"].append("video")
        log.info("video: %d s at %s in %.1f s", spec.duration, spec.size, manifest["video_seconds"])
    manifest.update(pdf_bytes=pdf.stat().st_size, video_bytes=video.stat().st_size)
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")  # beside the folder: the server's root is it
    return Media(folder=folder, pdf=pdf, video=video, spec=spec, manifest=manifest)
