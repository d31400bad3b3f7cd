"""What crosses the process boundary of classification: a :class:`FileTask` goes to a worker process, a
:class:`FileResult` comes back. Both are small, picklable, and hold no pixels: the worker writes thumbnails and frames
straight into the content-addressed cache (``store.cache``) and returns their cache paths.

Operations (``OPERATIONS``): ``thumbnail``, ``timeline``, ``metadata`` (which includes the content hash). The
outcome's ``classifierOperation`` and the tools' ``operations`` map onto them with :func:`parse_operations`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from store.errors import InvalidInput

OPERATIONS = ("thumbnail", "timeline", "metadata")
# every spelling a caller may use -> the operations it means
ALIASES: dict[str, tuple[str, ...]] = {
    "all": OPERATIONS,
    "thumbnail": ("thumbnail",), "thumbnails": ("thumbnail",), "generate_thumbnail": ("thumbnail",),
    "timeline": ("timeline",), "video-timeline": ("timeline",), "generate_timeline": ("timeline",),
    "metadata": ("metadata",), "extract_metadata": ("metadata",), "hash": ("metadata",),
}

DEFAULT_MAX_SIZE = 320  # preferences thumbnail.max_width / thumbnail.max_height
DEFAULT_QUALITY = 80
DEFAULT_FRAME_COUNT = 5  # preference timeline.frame_count
DEFAULT_TIMEOUT = 120.0  # seconds for one external tool call (ffmpeg / ffprobe) on one file

# the codes an error of a file that cannot be read at all starts with (``FILE_NOT_FOUND: cannot read the file: ...``):
# it vanished since it was indexed (deleted, moved, its folder replaced, a link to nothing now); something else than
# a regular file is at its path now (a directory, a FIFO, a device: never opened, a FIFO would block); the OS refused
# to open or read it (permissions, an I/O error of the device)
FILE_NOT_FOUND, NOT_A_FILE, FILE_UNREADABLE = "FILE_NOT_FOUND", "NOT_A_FILE", "FILE_UNREADABLE"
FILE_CODES = (FILE_NOT_FOUND, NOT_A_FILE, FILE_UNREADABLE)


def parse_operations(names: Iterable[str] | str | None) -> tuple[str, ...]:
    """The operations ``names`` mean, in OPERATIONS order; raises ValueError naming what is accepted."""
    if names is None:
        return OPERATIONS
    if isinstance(names, str):
        names = [names]
    wanted: set[str] = set()
    for name in names:
        key = str(name).strip().lower()
        if key not in ALIASES:
            raise ValueError(f"unknown classifier operation {name!r}; use any of: {', '.join(ALIASES)}")
        wanted.update(ALIASES[key])
    if not wanted:
        raise ValueError(f"no classifier operation given; use any of: {', '.join(ALIASES)}")
    return tuple(op for op in OPERATIONS if op in wanted)


def check_operations(operations: list[str] | str | None) -> tuple[str, ...]:
    """The operations a caller named, or InvalidInput naming the accepted ones (for the tools, the command line and
    the control socket: this module is light, so `assay classify` handed to a server loads no store or Prefect)."""
    try:
        return parse_operations(operations)
    except ValueError as exc:
        raise InvalidInput(str(exc), field="operations") from None


@dataclass(frozen=True)
class Params:
    """How to make the artifacts; part of every work key, so changing one redoes the work."""

    max_width: int = DEFAULT_MAX_SIZE
    max_height: int = DEFAULT_MAX_SIZE
    quality: int = DEFAULT_QUALITY
    frame_count: int = DEFAULT_FRAME_COUNT
    timeout: float = DEFAULT_TIMEOUT


@dataclass(frozen=True)
class FileTask:
    """One file to classify, as the worker sees it (from the entries row)."""

    entry_id: int
    path: str  # absolute
    media_type: str | None  # image | video | audio | document | text | other | None
    mime: str | None
    extension: str  # ".jpg", lower case, "" for none
    size: int
    operations: tuple[str, ...]  # a subset of OPERATIONS
    params: Params
    cache_root: str  # the data dir; cache paths are relative to it and start with "cache/"


@dataclass
class ArtifactOut:
    """One generated file in the cache, for an ``artifacts`` row."""

    type: str  # thumbnail | video-timeline | timeline-sheet
    cache_path: str  # relative to the data dir: "cache/ab/cd/<content hash>.jpg"
    mime_type: str = "image/jpeg"
    value: dict = field(default_factory=dict)  # width, height; frames: frame, timestamp (seconds)


@dataclass
class FileResult:
    """What the worker made of one file. An operation that does not apply to the file (a thumbnail of a text file)
    is in ``not_applicable``; one that failed is in ``errors`` with a reason a person can act on (the file itself
    unreadable: the reason starts with one of ``FILE_CODES``)."""

    entry_id: int
    path: str
    artifacts: list[ArtifactOut] = field(default_factory=list)
    metadata: dict[str, float | int | str] = field(default_factory=dict)  # flat keys -> metadata_values rows
    details: dict = field(default_factory=dict)  # the whole extracted record (streams, chapters, tags, ...)
    hash: str | None = None  # "xxh128:<32 hex>" of the file's content
    done: tuple[str, ...] = ()  # operations that completed (including "nothing to make" ones)
    not_applicable: dict[str, str] = field(default_factory=dict)  # operation -> why it does not apply
    errors: dict[str, str] = field(default_factory=dict)  # operation -> reason (without the operation's name)
    elapsed: float = 0.0  # seconds the worker spent
    # the disk an artifact was written to is full (the cache's, or a tool's temporary folder): not the file's fault,
    # so no error of the file; the operations not in ``done`` are left to the next run, and the run stops (NO_SPACE)
    no_space: str | None = None
