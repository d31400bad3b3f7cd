"""Generated test media for the citations capability: sources whose structure the tests know exactly.

Nothing is downloaded. Video and audio come from the ffmpeg binary (lavfi sources), PDFs from PyMuPDF, Markdown is
written here. Each maker takes the file's path (str or Path), creates its parent directories, writes the file and
returns the path (a Path).

- ``video_with_chapters``: container chapters from an ffmetadata file (titles, start/end seconds as given).
- ``video_with_scenes``: visibly different lavfi sources concatenated (testsrc, smptebars, red, mandelbrot, ...), so
  the cuts are at ``seconds_each``, ``2 * seconds_each``, ...; a keyframe every second (``-g`` = the frame rate).
- ``audio_with_silences``: sine tones separated by silent gaps; tone ``i`` starts at ``sum(tones[:i]) + i * gap``.
- ``pdf_outline``: pages with the text "page N" and a (nested) outline.
- ``markdown_headings``: :data:`MARKDOWN_HEADINGS` (heading lines and the line ranges a headings map gives them).
"""

from __future__ import annotations

from pathlib import Path

from tests.media import ffmpeg

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


def _prepare(path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _escape(value: str) -> str:
    """A value in an ffmetadata file: '=', ';', '#', '\\' and newlines are escaped with a backslash."""
    out = value.replace("\\", "\\\\")
    for ch in "=;#\n":
        out = out.replace(ch, "\\" + ch)
    return out


def video_with_chapters(path: str | Path, chapters=(("Intro", 0, 2), ("Main", 2, 5)), size: str = "160x120",
                        audio: bool = True, title: str | None = "Chaptered video") -> Path:
    """An H.264 MP4 of ``testsrc`` (with a sine tone when ``audio``) as long as the last chapter's end, with container
    chapters ``(title, start s, end s)`` and a title tag."""
    path = _prepare(path)
    seconds = max(end for _, _, end in chapters)
    meta = path.with_name(path.name + ".ffmeta")
    lines = [";FFMETADATA1"] + ([f"title={_escape(title)}"] if title else [])
    for name, start, end in chapters:
        lines += ["[CHAPTER]", "TIMEBASE=1/1000", f"START={int(round(start * 1000))}",
                  f"END={int(round(end * 1000))}", f"title={_escape(name)}"]
    meta.write_text("\n".join(lines) + "\n", encoding="utf-8")
    args = ["-f", "lavfi", "-i", f"testsrc=size={size}:rate={RATE}:duration={seconds}"]
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=440:sample_rate=44100:duration={seconds}"]
    args += ["-i", "file:" + str(meta), "-map", "0:v"] + (["-map", "1:a"] if audio else [])
    meta_index = "2" if audio else "1"
    try:
        ffmpeg(*args, "-map_metadata", meta_index, "-map_chapters", meta_index, "-c:v", "libx264",
               "-preset", "ultrafast", "-pix_fmt", "yuv420p", "-g", str(RATE), *(["-c:a", "aac"] if audio else []),
               "-shortest", "file:" + str(path))
    finally:
        meta.unlink(missing_ok=True)
    return path


def video_with_scenes(path: str | Path, scenes: int = 3, seconds_each: float = 2, size: str = "160x120",
                      audio: bool = False) -> Path:
    """An H.264 MP4 of ``scenes`` visibly different sources, ``seconds_each`` long each, concatenated: the true cuts
    are at ``seconds_each * k`` for k = 1 .. scenes - 1. No chapters; a keyframe every second."""
    if not 1 <= scenes <= len(SCENE_SOURCES):
        raise ValueError(f"scenes must be 1-{len(SCENE_SOURCES)}")
    path = _prepare(path)
    args: list[str] = []
    for source in SCENE_SOURCES[:scenes]:
        sep = ":" if "=" in source else "="  # -t, not duration=: mandelbrot has no duration option
        args += ["-f", "lavfi", "-t", f"{seconds_each:g}", "-i", f"{source}{sep}size={size}:rate={RATE}"]
    graph = "".join(f"[{i}:v]setsar=1,format=yuv420p[v{i}];" for i in range(scenes))
    graph += "".join(f"[v{i}]" for i in range(scenes)) + f"concat=n={scenes}:v=1:a=0[out]"
    maps = ["-map", "[out]"]
    if audio:
        args += ["-f", "lavfi", "-i", f"sine=frequency=330:sample_rate=44100:duration={scenes * seconds_each}"]
        maps += ["-map", f"{scenes}:a", "-c:a", "aac"]
    ffmpeg(*args, "-filter_complex", graph, *maps, "-c:v", "libx264", "-preset", "ultrafast", "-g", str(RATE),
           "-sc_threshold", "0", "-map_chapters", "-1", "file:" + str(path))
    return path


def audio_with_silences(path: str | Path, tones=(1.5, 1.5, 1.5), gap: float = 1.0,
                        title: str | None = "Tones and silences") -> Path:
    """Audio (format by extension: .wav, .mp3, .m4a ...) of sine tones of the given lengths (seconds) separated by
    ``gap`` seconds of digital silence. Tone i spans [sum(tones[:i]) + i*gap, that + tones[i]]."""
    path = _prepare(path)
    args: list[str] = []
    labels = []
    index = 0
    for i, seconds in enumerate(tones):
        if i:
            args += ["-f", "lavfi", "-i", f"anullsrc=channel_layout=mono:sample_rate=44100:duration={gap}"]
            labels.append(f"[{index}:a]")
            index += 1
        args += ["-f", "lavfi", "-i", f"sine=frequency={440 + 110 * i}:sample_rate=44100:duration={seconds}"]
        labels.append(f"[{index}:a]")
        index += 1
    graph = "".join(labels) + f"concat=n={len(labels)}:v=0:a=1,aformat=channel_layouts=mono[out]"
    meta = ["-metadata", f"title={title}"] if title else []
    ffmpeg(*args, "-filter_complex", graph, "-map", "[out]", *meta, "file:" + str(path))
    return path


def tone_spans(tones=(1.5, 1.5, 1.5), gap: float = 1.0) -> list[tuple[float, float]]:
    """Where audio_with_silences puts its tones: (start, end) seconds of each."""
    spans, at = [], 0.0
    for seconds in tones:
        spans.append((at, at + seconds))
        at += seconds + gap
    return spans


def pdf_outline(path: str | Path, pages: int = 12, toc=None, title: str | None = "Outlined Book") -> Path:
    """A PDF of ``pages`` pages, page N with the text "page N", an outline ``toc`` ([level, title, page] entries;
    :data:`PDF_TOC` by default, entries past the last page dropped) and a title in its metadata."""
    import pymupdf

    path = _prepare(path)
    toc = [list(entry) for entry in (PDF_TOC if toc is None else toc) if entry[2] <= pages]
    doc = pymupdf.open()
    try:
        for n in range(1, pages + 1):
            page = doc.new_page(width=595, height=842)
            page.insert_text((72, 72), f"page {n}", fontsize=14)
        if toc:
            doc.set_toc(toc)
        if title:
            doc.set_metadata({"title": title})
        doc.save(str(path))
    finally:
        doc.close()
    return path


def markdown_headings(path: str | Path) -> Path:
    """:data:`MARKDOWN_TEXT`: nested headings (``# Alpha`` line 1, ``## Alpha One`` line 4, ``## Alpha Two`` line
    10, ``### Alpha Two Deep`` line 13, ``# Beta`` line 14; 20 lines) with ``#`` lines inside fences that are not
    headings. :data:`MARKDOWN_HEADINGS` holds the line ranges."""
    path = _prepare(path)
    path.write_text(MARKDOWN_TEXT, encoding="utf-8")
    return path
