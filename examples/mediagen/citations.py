"""The citations capability's known sources: media whose structure the tests know exactly.

- ``video_with_chapters``: container chapters (titles, start/end seconds as given) and a title tag.
- ``video_with_scenes``: visibly different lavfi sources one after another (testsrc, smptebars, red, mandelbrot, ...),
  so the cuts are at ``seconds_each``, ``2 * seconds_each``, ...; a keyframe every second (and so at each cut).
- ``audio_with_silences``: sine tones separated by silent gaps; tone ``i`` starts at ``sum(tones[:i]) + i * gap``
  (``tone_spans``).
- ``pdf_outline``: pages with the text "page N" and a (nested) outline (:data:`PDF_TOC`, :data:`PDF_RANGES`).
- ``markdown_headings``: :data:`MARKDOWN_TEXT` (heading lines and the line ranges a headings map gives them).
"""

from __future__ import annotations

from pathlib import Path

from . import av
from .av import audio_with_silences, tone_spans  # noqa: F401 (the citations' sources too)
from .files import prepare
from .pdfs import Line, write_pdf

RATE = 25  # frames per second of the generated videos; also the keyframe interval (one a second)

# the lavfi sources of video_with_scenes, in order: each looks nothing like the one before it
SCENE_SOURCES = ("testsrc", "smptebars", "color=c=red", "mandelbrot", "color=c=blue", "testsrc2", "color=c=green",
                 "rgbtestsrc")

# pdf_outline's default outline: (level, title, page); with 12 pages the sections' page ranges are PDF_RANGES
PDF_TOC = [[1, "Chapter 1", 1], [2, "Intro", 1], [2, "Definition", 3], [1, "Chapter 2", 5], [2, "Method", 6],
           [3, "Details", 7], [2, "Results", 9], [1, "Appendix", 11]]
PDF_RANGES = {"chapter_1": [1, 4], "chapter_1.intro": [1, 2], "chapter_1.definition": [3, 4],
              "chapter_2": [5, 10], "chapter_2.method": [6, 8], "chapter_2.method.details": [7, 8],
              "chapter_2.results": [9, 10], "appendix": [11, 12]}

MARKDOWN_TEXT = """# Alpha

Alpha's introduction.
## Alpha One

Text of alpha one.
```sh
# not a heading (inside a fence)
```
## Alpha Two

Text of alpha two.
### Alpha Two Deep
# Beta

Beta's text.
~~~
## also not a heading
~~~
The last line of the file.
"""
# heading id -> (title, line of the heading, [first, last] line a headings map gives it); the file has 20 lines
MARKDOWN_LINES = 20
MARKDOWN_HEADINGS = {
    "alpha": ("Alpha", 1, [1, 13]),
    "alpha.alpha_one": ("Alpha One", 4, [4, 9]),
    "alpha.alpha_two": ("Alpha Two", 10, [10, 13]),
    "alpha.alpha_two.alpha_two_deep": ("Alpha Two Deep", 13, [13, 13]),
    "beta": ("Beta", 14, [14, 20]),
}


def video_with_chapters(path: str | Path, chapters=(("Intro", 0, 2), ("Main", 2, 5)), size: str = "160x120",
                        audio: bool = True, title: str | None = "Chaptered video") -> Path:
    """An H.264 MP4 of ``testsrc`` (with a sine tone when ``audio``) as long as the last chapter's end, with container
    chapters ``(title, start s, end s)`` and a title tag; a keyframe every second."""
    return av.video(path, seconds=max(end for _, _, end in chapters), size=size, rate=RATE, audio=audio, title=title,
                    chapters=[(start, end, name) for name, start, end in chapters])


def video_with_scenes(path: str | Path, scenes: int = 3, seconds_each: float = 2, size: str = "160x120",
                      audio: bool = False) -> Path:
    """An H.264 MP4 of ``scenes`` visibly different sources, ``seconds_each`` long each, one after another: the true
    cuts are at ``seconds_each * k`` for k = 1 .. scenes - 1. No chapters; a keyframe every second and at each cut."""
    if not 1 <= scenes <= len(SCENE_SOURCES):
        raise ValueError(f"scenes must be 1-{len(SCENE_SOURCES)}")
    return av.scene_video(path, SCENE_SOURCES[:scenes], seconds_each=seconds_each, size=size, rate=RATE, gop=RATE,
                          tones=[330] if audio else None)


def pdf_outline(path: str | Path, pages: int = 12, toc=None, title: str | None = "Outlined Book") -> Path:
    """A PDF of ``pages`` pages, page N with the text "page N", an outline ``toc`` ([level, title, page] entries;
    :data:`PDF_TOC` by default, entries past the last page dropped) and a title in its metadata."""
    toc = [list(entry) for entry in (PDF_TOC if toc is None else toc) if entry[2] <= pages]
    return write_pdf(path, [[Line(f"page {n}", (72, 72), 14)] for n in range(1, pages + 1)], toc=toc,
                     metadata={"title": title} if title else None)


def markdown_headings(path: str | Path) -> Path:
    """:data:`MARKDOWN_TEXT`: nested headings (``# Alpha`` line 1, ``## Alpha One`` line 4, ``## Alpha Two`` line
    10, ``### Alpha Two Deep`` line 13, ``# Beta`` line 14; 20 lines) with ``#`` lines inside fences that are not
    headings. :data:`MARKDOWN_HEADINGS` holds the line ranges."""
    path = prepare(path)
    path.write_text(MARKDOWN_TEXT, encoding="utf-8")
    return path
