"""Scans of a whole video or audio file with ffmpeg: scene cuts (the scene score of frames scaled down first) and
silences (silencedetect), and the spans they make.

ffmpeg runs as an argument list on ``file:`` + the absolute path (a name like ``-x.mp4`` is never an option), with a
timeout that grows with the duration, and is killed when ``should_cancel()`` turns true
(``flows.core.outcomes.Cancelled`` is raised). Its stderr is parsed line by line as it comes, never held whole."""

from __future__ import annotations

import collections
import re
import subprocess
import threading
import time
from typing import Callable, Iterator

from flows.citations.builders.sources import failed
from flows.citations.model import MAX_NODES
from flows.media.common import MediaError, input_path, tool
from flows.core.outcomes import Cancelled

# seconds a scan may take: a base plus a share of the source's duration (a scan decodes all of it)
SCAN_TIMEOUT_BASE = 120.0
SCAN_TIMEOUT_PER_SECOND = 1.0
SCENE_THRESHOLD = 0.3  # ffmpeg scene score (0-1) above which a frame starts a new scene
SCENE_WIDTH = 160  # keyframes are scaled to this width before they are compared: a change needs no detail
MIN_SCENE = 1.0  # seconds: a shorter scene is merged into the one before it
# the keyframe look: a span between two keyframes is looked at frame by frame when their pictures differ by more
# than this (mean absolute difference, 0-100; a cut between keyframes scores 10-30+, a still lecture slide ~1)
CANDIDATE_CHANGE = 5.0
MIN_KEYFRAME_SPACING = 0.5  # seconds: keyframes closer than this on average: one pass over every frame instead
SECOND_LOOK_SHARE = 0.6  # share of the duration: when the spans to look at cover more, one pass over every frame
MAX_SECOND_LOOKS = 400  # spans: more, one pass over every frame instead
SPANS_PER_RUN = 24  # spans looked at by one ffmpeg run (an input, a demuxer and a decoder each)
SILENCE_NOISE_DB = -35  # silencedetect's noise floor
SILENCE_MIN = 0.5  # seconds of quiet that count as a silence
MIN_SEGMENT = 0.5  # seconds: a shorter sound between silences is merged into its neighbour


def _ffmpeg_lines(cmd: list[str], *, timeout: float, should_cancel: Callable[[], bool], what: str) -> Iterator[str]:
    """Run ``cmd`` (a list, no shell) and yield its stderr line by line as it comes. A watcher kills it when
    ``should_cancel()`` turns true (Cancelled) or the timeout passes (EXTRACTION_FAILED "timed out"); a failure is
    EXTRACTION_FAILED with ffmpeg's last lines. Stdout is discarded."""
    if should_cancel():
        raise Cancelled(f"{what} not started: cancel requested")
    try:
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    except OSError as exc:
        raise failed(f"cannot start {what}", exc.strerror or str(exc)) from None
    stopped: list[str] = []
    finished = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + timeout
        while not finished.wait(0.1):
            if should_cancel():
                stopped.append("cancelled")
            elif time.monotonic() > deadline:
                stopped.append("timeout")
            if stopped:
                proc.kill()
                return

    watcher = threading.Thread(target=watch, name=f"{what}-watch", daemon=True)
    watcher.start()
    tail: collections.deque[str] = collections.deque(maxlen=4)
    try:
        assert proc.stderr is not None
        for raw in proc.stderr:
            line = raw.decode("utf-8", "replace").rstrip()
            if line:
                tail.append(line)
                yield line
        proc.wait()
    finally:
        finished.set()
        if proc.poll() is None:  # the consumer stopped early or raised
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()
        watcher.join()
    if stopped and stopped[0] == "cancelled":
        raise Cancelled(f"{what} stopped: cancel requested")
    if stopped:
        raise failed(what, f"timed out after {timeout:g} s")
    if proc.returncode != 0:
        said = next((ln for ln in reversed(tail) if "error" in ln.lower() or "invalid" in ln.lower()), None)
        said = (said or (tail[-1] if tail else f"exit status {proc.returncode}"))
        if said.startswith("file:") and ": " in said:
            said = said.rsplit(": ", 1)[-1]
        raise failed(what, f"failed: {said[:200]}")


def _scan_timeout(duration: float | None) -> float:
    return SCAN_TIMEOUT_BASE + SCAN_TIMEOUT_PER_SECOND * (duration or 0.0)


_PTS = re.compile(r"\bpts_time:\s*(-?[0-9.]+(?:e[-+]?\d+)?)")
_SPAN = re.compile(r"\[showinfo@s(\d+) @ ")
_MAFD = re.compile(r"lavfi\.scd\.mafd=\s*([0-9.]+)")
_SILENCE_START = re.compile(r"silence_start:\s*(-?[0-9.]+(?:e[-+]?\d+)?)")
_SILENCE_END = re.compile(r"silence_end:\s*(-?[0-9.]+(?:e[-+]?\d+)?)")


def _ffmpeg() -> str:
    try:
        return tool("ffmpeg")
    except MediaError as exc:
        raise failed("ffmpeg", str(exc)) from None


def _decode_args(path: str, *, keyframes: bool = False, start: float | None = None, length: float | None = None,
                 threads: int = 0) -> list[str]:
    """ffmpeg's input arguments, decoding as little as a scene score needs: no loop filter, no frame nothing
    references (or keyframes only), from ``start`` for ``length`` seconds (input options: nothing more is read)."""
    seek = ["-ss", f"{start:.3f}"] if start else []
    span = ["-t", f"{length:.3f}"] if length is not None else []
    return ["-threads", str(threads), "-skip_loop_filter", "all", "-skip_frame", "nokey" if keyframes else "noref",
            *seek, *span, "-i", input_path(path)]


def _command(*args: str) -> list[str]:
    return [_ffmpeg(), "-hide_banner", "-nostdin", "-nostats", "-loglevel", "info", *args]


def _score(threshold: float) -> str:
    return f"select='gt(scene\\,{threshold:g})'"


def _cuts_in(path: str, threshold: float, timeout: float, should_cancel: Callable[[], bool]) -> list[float]:
    """Cuts by the scene score of every decoded frame of the whole file, scored as the scene filter alone scores
    them (full-size frames: the same scores, so the same cuts)."""
    cmd = _command(*_decode_args(path), "-map", "0:v:0", "-an", "-sn", "-dn",
                   "-vf", f"{_score(threshold)},showinfo", "-f", "null", "-")
    cuts = []
    for line in _ffmpeg_lines(cmd, timeout=timeout, should_cancel=should_cancel, what="ffmpeg scene detection"):
        if line.startswith("[Parsed_showinfo"):  # only the filter's own lines: never a tag's text
            found = _PTS.search(line)
            if found:
                cuts.append(float(found.group(1)))
    return cuts


def _cuts_in_spans(path: str, spans: list[tuple[float, float]], threshold: float, timeout: float,
                   should_cancel: Callable[[], bool]) -> list[float]:
    """Cuts in the given (start, length) spans only, SPANS_PER_RUN of them per ffmpeg run: each span is an input of
    its own (seeking to its keyframe, reading no further than its end), scored by a chain of its own whose showinfo
    is named after it (``showinfo@s3``), so each time is added to its span's start. One decoding thread per input:
    the spans are short, frame threads would spend more starting than decoding."""
    cuts: list[float] = []
    for first in range(0, len(spans), SPANS_PER_RUN):
        batch = spans[first:first + SPANS_PER_RUN]
        inputs: list[str] = []
        chains, outputs = [], []
        for i, (start, length) in enumerate(batch):
            inputs += _decode_args(path, start=start, length=length, threads=1)
            chains.append(f"[{i}:v:0]{_score(threshold)},showinfo@s{i}[o{i}]")
            outputs += ["-map", f"[o{i}]", "-f", "null", "-"]
        cmd = _command(*inputs, "-filter_complex", ";".join(chains), *outputs)
        for line in _ffmpeg_lines(cmd, timeout=timeout, should_cancel=should_cancel, what="ffmpeg scene detection"):
            named = _SPAN.match(line)
            if named and (found := _PTS.search(line)) is not None:
                cuts.append(batch[int(named.group(1))][0] + float(found.group(1)))
    return cuts


def _keyframe_changes(path: str, timeout: float,
                      should_cancel: Callable[[], bool]) -> list[tuple[float, float]]:
    """(time, mean absolute difference from the keyframe before, 0-100) of every keyframe: a cheap first look
    (one decoded frame per GOP) at where the picture changes."""
    graph = f"scale={SCENE_WIDTH}:-2:flags=fast_bilinear,scdet=t=100,metadata=mode=print:key=lavfi.scd.mafd"
    cmd = _command(*_decode_args(path, keyframes=True), "-map", "0:v:0", "-an", "-sn", "-dn", "-vf", graph,
                   "-f", "null", "-")
    out: list[tuple[float, float]] = []
    at: float | None = None
    for line in _ffmpeg_lines(cmd, timeout=timeout, should_cancel=should_cancel, what="ffmpeg keyframe scan"):
        if not line.startswith("[Parsed_metadata"):
            continue
        if (found := _PTS.search(line)) is not None:
            at = float(found.group(1))
        elif at is not None and (found := _MAFD.search(line)) is not None:
            out.append((at, float(found.group(1))))
            at = None
    return out


def _candidates(keys: list[tuple[float, float]], duration: float) -> list[tuple[float, float]] | None:
    """The spans between two keyframes that differ (the later keyframe included), merged where they touch; None when
    keyframes are too dense or the picture changes too often for a second look to save decoding."""
    if len(keys) < 3 or (keys[-1][0] - keys[0][0]) / (len(keys) - 1) < MIN_KEYFRAME_SPACING:
        return None
    spans: list[tuple[float, float]] = []
    for (before, _), (key, change) in zip(keys, keys[1:]):
        if change < CANDIDATE_CHANGE:
            continue
        if spans and spans[-1][1] >= before:
            spans[-1] = (spans[-1][0], key)
        else:
            spans.append((before, key))
    if len(spans) > MAX_SECOND_LOOKS or sum(b - a for a, b in spans) > SECOND_LOOK_SHARE * duration:
        return None
    return spans


def scene_cuts(path: str, *, duration: float | None = None, frame_rate: float | None = None,
               threshold: float = SCENE_THRESHOLD, should_cancel: Callable[[], bool] = lambda: False) -> list[float]:
    """Seconds from the start of the file (ffmpeg's timeline: the container's start time already removed) where a
    new scene starts: frames whose scene score (the ``select`` filter's, on full-size frames, as the scene filter
    alone scores them) passes ``threshold``.

    Decoding is nearly all the cost, so only what can hold a cut is decoded. First the keyframes alone (one frame
    per GOP, a few percent of the decoding), scaled down and compared: a cut can only be between two keyframes whose
    pictures differ (mean absolute difference over CANDIDATE_CHANGE; a still slide stays near 1, a cut is 10-60).
    Then only those spans are decoded frame by frame (from the keyframe before through the keyframe after) and
    scored, many spans to one ffmpeg run. When keyframes are dense (under 0.5 s apart on average), the picture
    changes between most of them, or there are too many such spans, the whole file is scored in one pass instead.
    The decoder skips H.264's deblocking loop filter and frames nothing references (``-skip_loop_filter all
    -skip_frame noref``: a cut is found at most a frame or two late on streams with B-frames); audio, subtitles
    and data are not decoded. Times come from ``showinfo`` on stderr, read line by line."""
    timeout = _scan_timeout(duration)
    spans = None
    if duration:
        spans = _candidates(_keyframe_changes(path, timeout, should_cancel), duration)
    if spans is None:
        cuts = _cuts_in(path, threshold, timeout, should_cancel)
    else:  # each span through its closing keyframe (half a frame more)
        half = 0.5 / frame_rate if frame_rate else 0.02
        cuts = _cuts_in_spans(path, [(start, end - start + half) for start, end in spans], threshold, timeout,
                              should_cancel)
    return sorted({round(c, 3) for c in cuts if c > 0})


def silences(path: str, *, duration: float | None = None,
             should_cancel: Callable[[], bool] = lambda: False) -> list[tuple[float, float]]:
    """(start, end) seconds of the silences ffmpeg's silencedetect finds (noise -35 dB, at least 0.5 s); a silence
    still open at the end runs to ``duration``."""
    try:
        ffmpeg = tool("ffmpeg")
    except MediaError as exc:
        raise failed("ffmpeg", str(exc)) from None
    cmd = [ffmpeg, "-hide_banner", "-nostdin", "-nostats", "-loglevel", "info", "-threads", "0",
           "-i", input_path(path), "-map", "0:a:0", "-vn", "-sn", "-dn",
           "-af", f"silencedetect=noise={SILENCE_NOISE_DB}dB:d={SILENCE_MIN:g}", "-f", "null", "-"]
    out: list[tuple[float, float]] = []
    opened: float | None = None
    for line in _ffmpeg_lines(cmd, timeout=_scan_timeout(duration), should_cancel=should_cancel,
                              what="ffmpeg silence detection"):
        if not line.startswith("[silencedetect"):  # only the filter's own lines: never a tag's text
            continue
        if (found := _SILENCE_START.search(line)) is not None:
            opened = max(0.0, float(found.group(1)))
        elif (found := _SILENCE_END.search(line)) is not None and opened is not None:
            out.append((opened, float(found.group(1))))
            opened = None
    if opened is not None and duration is not None and duration > opened:
        out.append((opened, duration))
    return out


def merge_short(bounds: list[float], shortest: float) -> list[float]:
    """Scene boundaries [0, cut1, ..., duration] without cuts that would leave a scene shorter than ``shortest``
    (it joins the scene before it; a short last scene joins the one before)."""
    out = [bounds[0]]
    for cut in bounds[1:-1]:
        if cut - out[-1] >= shortest:
            out.append(cut)
    end = bounds[-1]
    if len(out) > 1 and end - out[-1] < shortest:
        out.pop()
    out.append(end)
    return out


def sounds(quiet: list[tuple[float, float]], duration: float) -> list[tuple[float, float]]:
    """The spans of sound between silences, each at least MIN_SEGMENT long (a shorter one joins its neighbour), at
    most ``MAX_NODES`` of them."""
    spans: list[tuple[float, float]] = []
    at = 0.0
    for start, end in sorted(quiet):
        if start > at:
            spans.append((at, min(start, duration)))
        at = max(at, end)
    if duration > at:
        spans.append((at, duration))
    merged: list[tuple[float, float]] = []
    for span in spans:
        if merged and (span[1] - span[0] < MIN_SEGMENT or merged[-1][1] - merged[-1][0] < MIN_SEGMENT):
            merged[-1] = (merged[-1][0], span[1])
        else:
            merged.append(span)
    while len(merged) > MAX_NODES:  # too many: neighbours pair up (the gap between them joins the segment)
        merged = [(a[0], b[1]) for a, b in zip(merged[::2], merged[1::2])] + ([merged[-1]] if len(merged) % 2 else [])
    return merged


def scene_spans(cuts: list[float], duration: float) -> list[tuple[float, float]]:
    bounds = merge_short([0.0, *[c for c in cuts if 0 < c < duration], duration], MIN_SCENE)
    shortest = MIN_SCENE
    while len(bounds) - 1 > MAX_NODES:  # too many scenes: merge more
        shortest *= 2
        bounds = merge_short(bounds, shortest)
    return list(zip(bounds[:-1], bounds[1:]))
