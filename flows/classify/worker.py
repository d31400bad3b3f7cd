"""The worker side of classification: :func:`classify_file` turns one :class:`FileTask` into a :class:`FileResult`.

It runs in a worker process (a pool of them spreads the work over the cores), never raises, never touches the store:
it decides what kind of file it has (media type, then extension, then MIME type), runs each requested operation,
writes the images it makes into the content-addressed cache (``store.cache.put``) and returns small data.
Each operation's failure is caught on its own and recorded as a short reason, so a broken video still gets its hash.
A file that cannot be read at all (gone since it was indexed, a directory or FIFO at its path now, refused by the OS)
fails each operation with a reason under one of ``FILE_CODES``. A full disk (the cache's, or ffmpeg's temporary
folder) is not the file's fault: the operations left are not tried, ``FileResult.no_space`` says so, and the
executor stops the run (NO_SPACE) rather than fail every file after it.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import time
from typing import Any, Callable

from flows.classify.model import (FILE_NOT_FOUND, FILE_UNREADABLE, NOT_A_FILE, ArtifactOut, FileResult, FileTask,
                                  Params)
from flows.media import hashing, images, pdf, text, video
from flows.media.common import MediaError, encode_jpeg, no_space
from store import cache

log = logging.getLogger(__name__)

IMAGE_EXTENSIONS = frozenset(".jpg .jpeg .jpe .jfif .png .gif .bmp .tif .tiff .webp .heic .heif .avif .ico .ppm "
                             ".pgm .pbm .tga .jp2".split())
VIDEO_EXTENSIONS = frozenset(".mp4 .m4v .mov .mkv .avi .webm .wmv .flv .mpg .mpeg .3gp .mts .m2ts .ogv .vob .ts"
                             .split())
AUDIO_EXTENSIONS = frozenset(".mp3 .wav .flac .aac .m4a .ogg .oga .opus .wma .aiff .aif .alac .ape".split())


def kind_of(task: FileTask) -> str:
    """``image``, ``video``, ``audio``, ``pdf``, ``text`` or ``other`` for a task: its media type, else its extension,
    else its MIME type."""
    ext = (task.extension or "").lower()
    mime = (task.mime or "").lower()
    if ext == ".pdf" or mime == "application/pdf":
        return "pdf"
    if task.media_type in ("image", "video", "audio", "text"):
        if task.media_type == "image" and ext == ".svg":
            return "other"  # a vector drawing: Pillow cannot render it
        return task.media_type
    for kind, exts in (("image", IMAGE_EXTENSIONS), ("text", text.TEXT_EXTENSIONS), ("video", VIDEO_EXTENSIONS),
                       ("audio", AUDIO_EXTENSIONS)):
        if ext in exts:
            return kind
    for prefix in ("image", "video", "audio", "text"):
        if mime.startswith(prefix + "/"):
            return prefix
    if mime in ("application/json", "application/xml", "application/x-yaml", "application/javascript"):
        return "text"
    return "other"


class _Run:
    """One file's classification in progress: what each operation adds to the result."""

    def __init__(self, task: FileTask):
        self.task = task
        self.params: Params = task.params
        self.result = FileResult(entry_id=task.entry_id, path=task.path)
        self.done: list[str] = []
        self._probe: video.Probe | None = None
        self._probe_error: str | None = None

    # --- bookkeeping ---

    def attempt(self, operation: str, fn: Callable[[], None]) -> None:
        """Run ``fn`` for ``operation``; a MediaError (or anything else) becomes that operation's error, a full disk
        the result's ``no_space`` (no error: the operation is left for the next run)."""
        try:
            fn()
        except MediaError as exc:
            self.result.errors[operation] = str(exc)
            return
        except MemoryError:
            self.result.errors[operation] = "out of memory decoding the file"
            return
        except Exception as exc:  # noqa: BLE001 - a worker never raises: the reason goes into the result
            full = no_space(exc)
            if full is not None:
                self.result.no_space = full.message
                return
            log.debug("classify %s: %s failed", self.task.path, operation, exc_info=True)
            self.result.errors[operation] = file_error(exc) if isinstance(exc, OSError) and _unreadable(exc) \
                else _describe(exc)
            return
        self.done.append(operation)

    def not_applicable(self, operation: str, why: str) -> None:
        self.result.not_applicable[operation] = why
        self.done.append(operation)

    def probe(self) -> video.Probe:
        """ffprobe once per file (thumbnail, timeline and metadata share it)."""
        if self._probe is None:
            if self._probe_error is not None:
                raise MediaError(self._probe_error)
            try:
                self._probe = video.probe(self.task.path, self.params.timeout)
            except MediaError as exc:
                self._probe_error = str(exc)
                raise
        return self._probe

    def store(self, kind: str, data: bytes, value: dict[str, Any]) -> None:
        """Put ``data`` in the cache (written beside and renamed: a full disk leaves no part of it) as an artifact."""
        try:
            rel = cache.put(self.task.cache_root, data, "jpg")
        except OSError as exc:
            full = no_space(exc, cache.cache_dir(self.task.cache_root))
            if full is None:
                raise
            raise full from exc
        self.result.artifacts.append(ArtifactOut(type=kind, cache_path=rel, mime_type="image/jpeg", value=value))

    # --- operations ---

    def thumbnail(self, kind: str) -> None:
        p = self.params
        box = (p.max_width, p.max_height, p.quality)
        made: tuple[bytes, int, int] | None
        if kind == "image":
            made = images.thumbnail(self.task.path, *box)
        elif kind == "pdf":
            made = pdf.thumbnail(self.task.path, *box)
        elif kind in ("video", "audio"):
            info = self.probe()  # what the file holds decides, not its name: an .mp4 may be sound only
            if info.video_streams:
                made = video.thumbnail(self.task.path, info, *box, timeout=p.timeout)
            else:
                made = video.cover_art(self.task.path, info, *box, timeout=p.timeout)
            if made is None:
                self.result.not_applicable["thumbnail"] = "no picture: sound only, without embedded cover art"
                return
        else:
            raise AssertionError(kind)
        data, width, height = made
        self.store("thumbnail", data, {"width": width, "height": height})

    def timeline(self) -> None:
        p = self.params
        info = self.probe()
        if not info.video_streams:
            self.result.not_applicable["timeline"] = "no video stream (an audio file)"
            return
        frames = video.timeline(self.task.path, info, p.frame_count, p.max_width, p.max_height, p.timeout)
        for i, (t, data, width, height) in enumerate(video.timeline_jpegs(frames, p.quality)):
            self.store("video-timeline", data, {"frame": i, "timestamp": t, "width": width, "height": height})
        sheet, columns, rows = video.contact_sheet(frames)
        self.store("timeline-sheet", encode_jpeg(sheet, p.quality),
                   {"frames": len(frames), "columns": columns, "rows": rows, "width": sheet.width,
                    "height": sheet.height})

    def metadata(self, kind: str) -> None:
        flat: dict[str, Any] = {}
        details: dict[str, Any] = {"kind": kind, "size": self.task.size}
        if self.task.size > 0:
            if kind == "image":
                flat, details = images.metadata(self.task.path)
            elif kind in ("video", "audio"):
                flat, details = video.metadata(self.probe())
            elif kind == "pdf":
                flat, details = pdf.metadata(self.task.path)
            elif kind == "text":
                flat, details = text.stats(self.task.path)
            details = {**details, "size": self.task.size}
        self.result.metadata.update(flat)
        self.result.details.update(details)


def file_error(exc: OSError) -> str:
    """The reason every operation of a file fails with when the file cannot be read at all, under its code."""
    reason = f"cannot read the file: {_describe(exc)}"
    if exc.errno in (errno.ENOENT, errno.ENOTDIR):
        return f"{FILE_NOT_FOUND}: {reason} (gone since it was indexed: deleted, moved, or a link to nothing now; " \
               "index its folder again)"
    return f"{FILE_UNREADABLE}: {reason}"


def _unreadable(exc: OSError) -> bool:
    """Whether ``exc`` is the OS refusing to find, open or read the file (not a decoder's complaint)."""
    return exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EACCES, errno.EPERM, errno.EIO, errno.ELOOP, errno.ENXIO)


def _describe(exc: BaseException) -> str:
    """A short human reason for an unexpected exception (its message, else its type), never a traceback."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror.lower()
    message = " ".join(str(exc).split())
    return (message or type(exc).__name__)[:200]


def classify_file(task: FileTask) -> FileResult:
    """Classify one file as ``task`` asks; never raises (every problem is in ``errors``)."""
    started = time.perf_counter()
    run = _Run(task)
    try:
        _classify(run)
    except Exception as exc:  # noqa: BLE001 - defensive: nothing may escape a worker
        full = no_space(exc)
        if full is not None:
            run.result.no_space = full.message
        else:
            for operation in task.operations:
                if operation not in run.done and operation not in run.result.errors:
                    run.result.errors[operation] = _describe(exc)
    run.result.done = tuple(op for op in task.operations if op in run.done)
    run.result.elapsed = round(time.perf_counter() - started, 6)
    return run.result


def _classify(run: _Run) -> None:
    task = run.task
    try:
        st = os.stat(task.path)
    except OSError as exc:
        for operation in task.operations:
            run.result.errors[operation] = file_error(exc)
        return
    if not stat.S_ISREG(st.st_mode):
        for operation in task.operations:
            run.result.errors[operation] = (f"{NOT_A_FILE}: not a regular file (a directory, FIFO, device or socket "
                                            "is at its path now: not read; index its folder again)")
        return
    kind = kind_of(task)
    empty = st.st_size == 0
    if kind == "text" and not empty and text.looks_binary(task.path):
        # ".ts" is TypeScript or an MPEG transport stream; binary content is not counted in lines and words
        kind = "video" if (task.extension or "").lower() in VIDEO_EXTENSIONS else "other"
    for operation in task.operations:
        if run.result.no_space is not None:
            break  # the disk is full: what is left is for the next run
        if operation == "thumbnail":
            if kind in ("text", "other"):
                label = "text files" if kind == "text" else "this kind of file"
                run.not_applicable("thumbnail", f"no thumbnail for {label}")
            elif empty:
                run.result.errors["thumbnail"] = "empty file"
            else:
                run.attempt("thumbnail", lambda: run.thumbnail(kind))
        elif operation == "timeline":
            if kind != "video":
                run.not_applicable("timeline", "timelines are made of videos only")
            elif empty:
                run.result.errors["timeline"] = "empty file"
            else:
                run.attempt("timeline", run.timeline)
        elif operation == "metadata":
            def metadata() -> None:
                run.result.hash = hashing.hash_file(task.path)
                run.metadata(kind)
            run.attempt("metadata", metadata)
