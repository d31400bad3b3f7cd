"""The trash: files that ``delete-files`` and the ``trash`` outcome remove go to a trash, from which ``undo`` restores
them; ``purge`` deletes them for good.

assay writes the freedesktop.org Trash (specification 1.0) of the file's volume itself: ``files/<name>`` holds the file
and ``info/<name>.trashinfo`` says where it came from (``Path=``, percent-encoded; absolute in the home trash, relative
to the volume's top dir in a volume trash) and when (``DeletionDate=``, local time). Why not send2trash, which writes
the same layout: it does not say where the file went, and undo needs exactly that. Writing it ourselves keeps the
three things that matter: a trashed file is one rename on its own filesystem (a 2 GB video is not copied), the
desktop's Trash shows it and can restore it, and assay knows the destination to restore from.

Which trash (:func:`trash_for`): the home trash (``$XDG_DATA_HOME/Trash``, by default ``~/.local/share/Trash``) for a
file on the same device; otherwise the trash of the file's volume, at its top dir (found by walking up while
``st_dev`` stays the same): ``$topdir/.Trash/$uid`` when ``$topdir/.Trash`` is a sticky directory and not a symlink,
else ``$topdir/.Trash-$uid`` (made 0700). Where the volume has no writable trash, assay's own trash under the data
dir (``<data_dir>/trash``, the same layout, absolute paths) takes the file, by a copy whose size and content hash are
checked before the source is removed.

The order is the specification's: the info file is made first (``O_EXCL``, which reserves the name), then the file is
renamed; a failed move removes the info file again. A crash between the two leaves an info file without a file, which
:func:`entries` skips.
"""

from __future__ import annotations

import itertools
import os
import stat
import time
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from urllib.parse import quote, unquote_to_bytes

from flows.fileops.disk import copy_verified, make_parents, reason, remove, rename_noreplace, rmtree
from store.errors import FileOperationError, InvalidInput, NotFound

HEADER = "[Trash Info]"
INFO_SUFFIX = ".trashinfo"
DATE_FORMAT = "%Y-%m-%dT%H:%M:%S"
# a name in files/ plus ".trashinfo" and a ".NNNNNN" counter must fit in one path component (255 bytes)
NAME_BYTES = 255 - len(INFO_SUFFIX) - 7


@dataclass(frozen=True)
class Trashed:
    """One thing in a trash: where it was, where it is now and when it went there."""

    original: str  # absolute path the file had
    path: str  # where it is now (in a trash's files/)
    info: str  # its .trashinfo
    trash: str  # the trash dir (the one holding files/ and info/)
    deleted_at: float  # seconds since the epoch, whole (the info file records seconds)
    kind: str  # "file" | "directory"


def home_trash(home: str) -> str:
    """The home trash of the user whose home is ``home``: ``$XDG_DATA_HOME/Trash`` when that is set (absolute) and
    ``home`` is this process's own home, else ``<home>/.local/share/Trash`` (a home a test passes never reaches the
    user's real trash)."""
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if os.path.isabs(xdg) and os.path.abspath(home) == os.path.abspath(os.path.expanduser("~")):
        return os.path.join(xdg, "Trash")
    return os.path.join(os.path.abspath(home), ".local", "share", "Trash")


def own_trash(data_dir: str) -> str:
    """assay's own trash, for files whose volume has no writable trash."""
    return os.path.join(os.path.abspath(data_dir), "trash")


def topdir(path: str) -> str:
    """The top dir of the volume holding ``path``: from its real parent folder (or the nearest that exists) up, while
    ``st_dev`` stays the same."""
    here = os.path.realpath(os.path.dirname(os.path.abspath(path)))
    while not os.path.isdir(here):
        here = os.path.dirname(here)
    dev = os.stat(here).st_dev
    while True:
        up = os.path.dirname(here)
        if up == here or os.stat(up).st_dev != dev:
            return here
        here = up


def trash_for(path: str, *, home: str, data_dir: str) -> str:
    """The trash dir a file at ``path`` goes to (its files/ and info/ made when missing, as the specification asks)."""
    return _choose(os.path.abspath(path), home=home, data_dir=data_dir)[0]


def move_to_trash(path: str, *, home: str, data_dir: str) -> Trashed:
    """Move a file or a directory (a symlink as itself) to its trash; FileOperationError names the path and why not."""
    src = os.path.abspath(path)
    try:
        st = os.lstat(src)
    except OSError as exc:
        raise FileOperationError(f"{src} cannot be trashed: {reason(exc)}", field="path") from None
    if os.path.ismount(src):
        raise FileOperationError(f"{src} cannot be trashed: it is the top of a mounted volume", field="path")
    trash, top = _choose(src, home=home, data_dir=data_dir)
    real = os.path.join(os.path.realpath(os.path.dirname(src)), os.path.basename(src))
    real_trash = os.path.realpath(trash)
    if _inside(real_trash, real):
        raise FileOperationError(f"{src} cannot be trashed: it holds the trash {trash}", field="path")
    if _inside(real, real_trash):
        raise FileOperationError(f"{src} is already in the trash {trash}; purge it to delete it for good",
                                 field="path")
    kind = "directory" if stat.S_ISDIR(st.st_mode) else "file"
    recorded = os.path.relpath(real, top) if top is not None else real
    now = int(time.time())
    crossing = st.st_dev != os.stat(os.path.join(trash, "files")).st_dev
    start = 1
    while True:
        try:
            name, start = _reserve(trash, os.path.basename(src), recorded, now, start)
        except OSError as exc:
            raise FileOperationError(f"{src} was not trashed: the trash {trash} cannot take its info file "
                                     f"({reason(exc)})", field="path") from None
        dst, info = os.path.join(trash, "files", name), os.path.join(trash, "info", name + INFO_SUFFIX)
        try:
            if crossing:
                left = _copy_verified_then_remove(src, dst)
            else:
                rename_noreplace(src, dst)
                left = []
        except FileExistsError:
            _quietly(os.unlink, info)  # another program took the name in files/ meanwhile: the next one
            continue
        except OSError as exc:
            _quietly(os.unlink, info)
            raise FileOperationError(f"{src} could not be moved to the trash {trash} ({reason(exc)}); "
                                     "it is where it was", field="path") from None
        except FileOperationError:
            _quietly(os.unlink, info)
            raise
        if left:
            raise FileOperationError(f"{src} is in the trash as {dst} (a complete, checked copy), but part of it "
                                     f"could not be removed: {'; '.join(left[:5])}", field="path")
        return Trashed(original=src, path=dst, info=info, trash=trash, deleted_at=float(now), kind=kind)


def restore(trashed: Trashed | str, *, to: str | None = None) -> str:
    """Put a trashed file back at its original place (or at ``to``), making missing parent folders; returns where.

    ``trashed`` is a :class:`Trashed` or the path of its file in files/ or of its info file. Refused
    (FileOperationError naming the path) when that place is taken now; NotFound when the trash no longer holds it.
    """
    item = _load(trashed, need_file=True)
    target = os.path.abspath(to) if to is not None else item.original
    field = "to" if to is not None else "path"
    if os.path.lexists(target):
        raise FileOperationError(f"{item.original} cannot be restored to {target}: that place is taken now "
                                 "(restore it elsewhere, or move what is there first)", field=field)
    made = make_parents(os.path.dirname(target), field=field)
    try:
        if os.lstat(item.path).st_dev == os.stat(os.path.dirname(target)).st_dev:
            rename_noreplace(item.path, target)
            left: list[str] = []
        else:
            left = _copy_verified_then_remove(item.path, target)
    except (OSError, FileOperationError) as exc:
        for folder in reversed(made):
            _quietly(os.rmdir, folder)
        if isinstance(exc, FileExistsError):
            raise FileOperationError(f"{item.original} cannot be restored to {target}: that place was taken "
                                     "meanwhile", field=field) from None
        if isinstance(exc, OSError):
            raise FileOperationError(f"{item.original} could not be restored to {target} ({reason(exc)}); "
                                     f"it is still in the trash as {item.path}", field=field) from None
        raise
    if not left:  # a restored copy whose trashed original could not all be removed stays listed, to be purged
        _quietly(os.unlink, item.info)
    return target


def entries(trash: str) -> list[Trashed]:
    """What a trash dir holds, read from its info files, oldest first; broken info files and info files whose file is
    gone are skipped."""
    trash = os.path.abspath(trash)
    try:
        names = os.listdir(os.path.join(trash, "info"))
    except OSError:
        return []
    found = [_read(trash, n[: -len(INFO_SUFFIX)], need_file=True) for n in names if n.endswith(INFO_SUFFIX)]
    return sorted((t for t in found if t is not None), key=lambda t: (t.deleted_at, t.path))


def purge(trashed: Trashed | str) -> int:
    """Delete a trashed file (or tree) for good, and its info file; returns the bytes its files held."""
    item = _load(trashed, need_file=False)
    freed = 0
    if os.path.lexists(item.path):
        freed = _measure_and_unlock(item.path)
        if os.path.isdir(item.path) and not os.path.islink(item.path):
            failures = rmtree(item.path)
            if failures:
                raise FileOperationError(f"{item.path} could only be partly deleted: {'; '.join(failures[:5])}",
                                         field="path")
        else:
            try:
                os.unlink(item.path)
            except OSError as exc:
                raise FileOperationError(f"{item.path} could not be deleted ({reason(exc)})", field="path") from None
    try:
        os.unlink(item.info)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            return freed
        raise FileOperationError(f"{item.info} could not be deleted ({reason(exc)})", field="path") from None
    return freed


def expired(trash: str, *, older_than_days: float, now: float | None = None) -> list[Trashed]:
    """The entries of ``trash`` deleted more than ``older_than_days`` days before ``now`` (the retention's due)."""
    if older_than_days < 0:
        raise InvalidInput(f"older_than_days must be 0 or more, not {older_than_days}", field="older_than_days")
    cutoff = (time.time() if now is None else now) - older_than_days * 86400
    return [t for t in entries(trash) if t.deleted_at < cutoff]


# choosing and making a trash


def _choose(src: str, *, home: str, data_dir: str) -> tuple[str, str | None]:
    """(trash dir, the volume's top dir when it is a volume trash, else None)."""
    dev = _device(src)
    home_t = home_trash(home)
    if _device(home_t) == dev and _own_dir(home_t):
        return home_t, None
    top = topdir(src)
    uid = os.getuid()
    shared = os.path.join(top, ".Trash")
    mode = 0
    with suppress(OSError):
        mode = os.lstat(shared).st_mode
    if stat.S_ISDIR(mode) and mode & stat.S_ISVTX and _own_dir(os.path.join(shared, str(uid))):
        return os.path.join(shared, str(uid)), top
    if _own_dir(os.path.join(top, f".Trash-{uid}")):
        return os.path.join(top, f".Trash-{uid}"), top
    own = own_trash(data_dir)
    try:
        for sub in ("files", "info"):
            os.makedirs(os.path.join(own, sub), mode=0o700, exist_ok=True)
    except OSError as exc:
        raise FileOperationError(f"{src} cannot be trashed: its volume has no writable trash and assay's own "
                                 f"trash {own} cannot be made ({reason(exc)})", field="path") from None
    return own, None


def _own_dir(trash: str) -> bool:
    """Make ``trash`` (0700) with files/ and info/ when missing; True when it is then a real directory of ours (not a
    symlink someone else planted) that we can write in."""
    try:
        os.makedirs(trash, mode=0o700, exist_ok=True)
        st = os.lstat(trash)
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid():
            return False
        for sub in ("files", "info"):
            os.makedirs(os.path.join(trash, sub), mode=0o700, exist_ok=True)
    except OSError:
        return False
    return all(os.access(os.path.join(trash, sub), os.W_OK | os.X_OK) for sub in ("files", "info"))


def _device(path: str) -> int:
    """The device of ``path`` (a symlink's own), or of its nearest existing folder when it does not exist."""
    here = os.path.abspath(path)
    with suppress(FileNotFoundError):
        return os.lstat(here).st_dev
    while True:
        here = os.path.dirname(here)
        with suppress(FileNotFoundError):
            return os.stat(here).st_dev


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


# info files


def _reserve(trash: str, base: str, recorded: str, when: int, start: int) -> tuple[str, int]:
    """Make the info file of a free name ("name", "name.2", ... from counter ``start``), O_EXCL so two programs never
    take the same; returns the name and the counter to go on from."""
    text = (f"{HEADER}\nPath={quote(os.fsencode(recorded), safe='/')}\n"
            f"DeletionDate={time.strftime(DATE_FORMAT, time.localtime(when))}\n")
    stem = os.fsdecode(os.fsencode(base)[:NAME_BYTES])
    for n in itertools.count(start):
        name = stem if n == 1 else f"{stem}.{n}"
        if os.path.lexists(os.path.join(trash, "files", name)):
            continue
        info = os.path.join(trash, "info", name + INFO_SUFFIX)
        try:
            fd = os.open(info, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError:
            _quietly(os.unlink, info)
            raise
        return name, n + 1
    raise AssertionError("unreachable")  # itertools.count never ends


def _read(trash: str, name: str, *, need_file: bool) -> Trashed | None:
    """The entry ``name`` of ``trash`` from its info file; None when the info file is broken (or, with ``need_file``,
    its file is gone)."""
    info = os.path.join(trash, "info", name + INFO_SUFFIX)
    path = os.path.join(trash, "files", name)
    try:
        with open(info, encoding="utf-8", errors="surrogateescape") as fh:
            lines = [line.strip() for line in fh.read().splitlines() if line.strip()]
    except OSError:
        return None
    if not lines or lines[0] != HEADER:
        return None
    values: dict[str, str] = {}
    for line in lines[1:]:
        if line.startswith("["):
            break  # another group: not ours to read
        key, sep, value = line.partition("=")
        if sep:
            values.setdefault(key.strip(), value.strip())
    try:
        recorded = os.fsdecode(unquote_to_bytes(values["Path"]))
        deleted_at = time.mktime(time.strptime(values["DeletionDate"], DATE_FORMAT))
    except (KeyError, ValueError, OverflowError):
        return None
    if not os.path.isabs(recorded):
        top = _topdir_of(trash)
        if top is None or not recorded:
            return None
        recorded = os.path.join(top, recorded)
    exists = os.path.lexists(path)
    if need_file and not exists:
        return None
    kind = "directory" if exists and os.path.isdir(path) and not os.path.islink(path) else "file"
    return Trashed(original=os.path.normpath(recorded), path=path, info=info, trash=trash, deleted_at=deleted_at,
                   kind=kind)


def _topdir_of(trash: str) -> str | None:
    """The volume's top dir of a volume trash (``$top/.Trash-$uid`` or ``$top/.Trash/$uid``), else None."""
    if os.path.basename(trash).startswith(".Trash-"):
        return os.path.dirname(trash)
    if os.path.basename(os.path.dirname(trash)) == ".Trash":
        return os.path.dirname(os.path.dirname(trash))
    return None


def _load(ref: Trashed | str, *, need_file: bool) -> Trashed:
    """The entry ``ref`` names, checked to lie in a trash's layout (nothing outside a trash is ever purged)."""
    if isinstance(ref, Trashed):
        name = os.path.basename(ref.path)
        if (ref.path != os.path.join(ref.trash, "files", name)
                or ref.info != os.path.join(ref.trash, "info", name + INFO_SUFFIX)):
            raise InvalidInput(f"{ref.path} is not an entry of the trash {ref.trash}", field="path")
        if need_file and not os.path.lexists(ref.path):
            raise NotFound(f"{ref.original} is no longer in the trash ({ref.path} is gone)", field="path")
        return ref
    path = os.path.normpath(os.path.abspath(ref))
    folder, base = os.path.split(path)
    if os.path.basename(folder) == "info" and base.endswith(INFO_SUFFIX):
        name = base[: -len(INFO_SUFFIX)]
    elif os.path.basename(folder) == "files":
        name = base
    else:
        raise InvalidInput(f"{ref} is not in a trash (neither in its files/ nor its info/)", field="path")
    trash = os.path.dirname(folder)
    item = _read(trash, name, need_file=need_file)
    if item is None:
        raise NotFound(f"{ref} is not an entry of the trash {trash} (no readable info file, or its file is gone)",
                       field="path")
    return item


# moving, copying and deleting


def _copy_verified_then_remove(src: str, dst: str) -> list[str]:
    """Move across filesystems: a copy checked by size and content hash in place (``disk.copy_verified``), then
    ``src`` removed. Raises (nothing changed) when the copy fails or differs, or a file's source cannot be removed;
    returns "path: reason" for what of a directory's source could not be removed (its complete copy is in place)."""
    copy_verified(src, dst)
    if os.path.isdir(src) and not os.path.islink(src):
        return rmtree(src)
    try:
        os.unlink(src)
    except OSError as exc:
        _quietly(remove, dst)
        raise FileOperationError(f"{src} could not be removed after its copy ({reason(exc)}); it is where it was",
                                 field="path") from None
    return []


def _measure_and_unlock(path: str) -> int:
    """Bytes of the files (and links) under ``path``; on the way, each folder is made readable, writable and
    enterable by its owner before it is walked into (a read-only folder's files cannot be deleted)."""
    total = _unlock(path)
    # nothing to walk in a file; a symlink given as the top os.walk would go through
    for folder, dirs, files in [] if os.path.islink(path) else os.walk(path):
        for name in dirs + files:
            total += _unlock(os.path.join(folder, name))
    return total


def _unlock(path: str) -> int:
    """Let a folder's owner read, write and enter it; the size of anything else (0 when it is gone)."""
    try:
        st = os.lstat(path)
        if not stat.S_ISDIR(st.st_mode):
            return st.st_size
        if st.st_mode & 0o700 != 0o700:
            os.chmod(path, stat.S_IMODE(st.st_mode) | 0o700)
    except OSError:
        pass  # rmtree then reports what cannot be deleted
    return 0


def _quietly(action: Callable[[str], object], path: str) -> None:
    """Clean up after a failure that is being reported: what cannot be removed (not empty, gone) is left."""
    with suppress(OSError):
        action(path)
