"""Where the file outcomes of a plan (``move``, ``copy``, ``rename``, ``trash``) would put each matched file, and what
a conflict there would do: the one planner that ``plan-preview`` shows and the executor then follows, so a preview
says exactly what the run does.

A destination is the outcome's template rendered over the file's fields (:mod:`dsl.templates`): its name parts
(``name``, ``stem``, ``extension`` without the dot, ``parent``: its folder's name, ``path``), the entries columns the
conditions know (``mtime``, ``size``, ``media_type``...) and the metadata classifiers extracted (``exif.Model``,
``title``, ``metadata.codec``, ``label``), fetched for a whole batch in one query. ``move``/``copy``: a destination
ending in "/" is a folder (the file keeps its name); a relative one is under the root the file is in; either must
stay inside the roots. ``rename``: the new name, in the file's folder.

A conflict is a destination that exists on disk, or that an earlier file of the same batch takes. The outcome's
``conflict`` mode resolves it: ``skip`` leaves the file where it is, ``rename_new`` takes the first free
``name (2).ext``, ``overwrite`` replaces what is there (the executor trashes it first), ``fail`` makes it that
file's error. A destination equal to the file's own path is nothing to do (``unchanged``).
"""

from __future__ import annotations

import os
import posixpath
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from sqlalchemy import and_, select
from sqlalchemy.engine import Engine

from dsl.fields import UnknownField, field_spec
from dsl.outcomes import CopyOutcome, MoveOutcome, OutcomeBase, RenameOutcome, TrashOutcome
from dsl.templates import MissingField, Template, parse_template
from flows.core.roots import Roots
from store.errors import AssayError
from store.models import MetadataValue

MV = MetadataValue.__table__

FILE_OUTCOMES = ("move", "copy", "rename", "trash")


@dataclass
class Planned:
    """What a file outcome would do to one file."""

    entry_id: int
    src: str
    action: str  # move | copy | rename | trash | skip (conflict: left where it is) | unchanged | error
    dst: str | None = None
    conflict: str | None = None  # exists (something is at dst) | taken (an earlier file of the batch goes there)
    resolution: str | None = None  # the conflict mode that decided: skip | rename_new | overwrite | fail
    error: str | None = None

    def public(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from": self.src, "to": self.dst, "action": self.action}
        if self.conflict:
            out["conflict"] = self.conflict
            out["resolution"] = self.resolution
        if self.error:
            out["error"] = self.error
        return out


def name_fields(path: str) -> dict[str, str]:
    """The name parts of ``path`` a template may use."""
    name = posixpath.basename(path)
    stem, dot, ext = name.rpartition(".")
    if not dot or not stem:  # "README", ".bashrc": no extension
        stem, ext = name, ""
    return {"name": name, "stem": stem, "extension": ext, "parent": posixpath.basename(posixpath.dirname(path)),
            "path": path}


class FieldValues:
    """The fields of a batch of entries, for the templates of one outcome: metadata read in one query."""

    def __init__(self, engine: Engine, rows: Sequence[Any], template: Template) -> None:
        self.rows = {int(r["id"]): r for r in rows}
        self.columns: dict[str, str] = {}
        keys: dict[str, str] = {}
        for name in template.fields():
            if name in name_fields("/x"):
                continue
            try:
                spec = field_spec(name)
            except UnknownField:
                continue  # refused at validation; a plan stored by an older version finds it missing
            if spec.column:
                self.columns[name] = spec.column
            elif spec.metadata_key:
                keys[name] = spec.metadata_key
            elif name == "label":
                keys[name] = "label"
        self.metadata: dict[tuple[int, str], Any] = {}
        if keys and self.rows:
            with engine.connect() as conn:
                found = conn.execute(select(MV.c.entry_id, MV.c.key, MV.c.num_value, MV.c.text_value).where(and_(
                    MV.c.entry_id.in_(list(self.rows)), MV.c.key.in_(list(set(keys.values()))))))
                by_key = {key: name for name, key in keys.items()}
                for entry_id, key, num, text in found:
                    self.metadata[(int(entry_id), by_key[key])] = num if num is not None else text

    def lookup(self, entry_id: int) -> Callable[[str], Any]:
        row = self.rows[entry_id]
        names = name_fields(row["path"])

        def value(field: str) -> Any:
            if field in names:
                return names[field] or None
            if field in self.columns:
                return row[self.columns[field]]
            return self.metadata.get((entry_id, field))
        return value


def root_of(roots: Roots, path: str) -> str | None:
    """The (deepest) root ``path`` is in."""
    inside = [r for r in roots.paths if path == r or path.startswith(r.rstrip("/") + "/")]
    return max(inside, key=len) if inside else None


def destination(outcome: OutcomeBase, template: Template, src: str, lookup: Callable[[str], Any],
                roots: Roots) -> str:
    """The path ``outcome`` gives the file at ``src`` (MissingField: a field it lacks; AssayError: outside the roots
    or not a path)."""
    rendered = template.render(lookup)
    if isinstance(outcome, RenameOutcome):
        if not rendered or rendered in (".", ".."):
            raise AssayError(f"the name template {template.text!r} gives {rendered!r} for this file: not a name")
        return posixpath.join(posixpath.dirname(src), rendered)
    base = root_of(roots, src) or posixpath.dirname(src)
    target = rendered if rendered.startswith("/") else posixpath.join(base, rendered)
    if target.endswith("/"):
        target = posixpath.join(target, posixpath.basename(src))
    target = posixpath.normpath(target)
    if not roots.allows(target) or roots.is_root(target):
        raise AssayError(f"the destination template {template.text!r} gives {target}, which is outside the allowed "
                         f"roots ({roots.describe()})")
    return target


def free_name(path: str, taken: Callable[[str], bool]) -> str:
    """``path`` itself when free, else the first free ``name (2).ext``, ``name (3).ext``..."""
    if not taken(path):
        return path
    folder, name = posixpath.split(path)
    parts = name_fields(path)
    stem, ext = parts["stem"], (f".{parts['extension']}" if parts["extension"] else "")
    n = 2
    while True:
        candidate = posixpath.join(folder, f"{stem} ({n}){ext}")
        if not taken(candidate):
            return candidate
        n += 1


def plan(engine: Engine, roots: Roots, outcome: OutcomeBase, rows: Sequence[Any], *,
         claimed: set[str] | None = None, exists: Callable[[str], bool] = os.path.lexists) -> list[Planned]:
    """What ``outcome`` would do to each of ``rows`` (entry rows, in order). ``claimed``: destinations earlier files
    of the same run take (updated here), so two files meant for one place conflict as on disk."""
    claimed = set() if claimed is None else claimed
    if isinstance(outcome, TrashOutcome):
        return [Planned(int(r["id"]), r["path"], "trash") for r in rows]
    if not isinstance(outcome, (MoveOutcome, CopyOutcome, RenameOutcome)):
        raise TypeError(f"{outcome.type} is not a file outcome")
    template = parse_template(outcome.name if isinstance(outcome, RenameOutcome) else outcome.to)
    values = FieldValues(engine, rows, template)
    out: list[Planned] = []
    for row in rows:
        entry_id, src = int(row["id"]), row["path"]
        try:
            dst = destination(outcome, template, src, values.lookup(entry_id), roots)
        except (MissingField, AssayError, ValueError) as exc:
            out.append(Planned(entry_id, src, "error", error=str(exc)))
            continue
        out.append(_resolve(outcome, entry_id, src, dst, claimed, exists))
    return out


def _resolve(outcome: MoveOutcome | CopyOutcome | RenameOutcome, entry_id: int, src: str, dst: str,
             claimed: set[str], exists: Callable[[str], bool]) -> Planned:
    if dst == src:
        return Planned(entry_id, src, "unchanged", dst=dst)
    conflict = "taken" if dst in claimed else "exists" if exists(dst) else None
    if conflict is None:
        claimed.add(dst)
        return Planned(entry_id, src, outcome.type, dst=dst)
    mode = outcome.conflict
    if mode == "skip":
        return Planned(entry_id, src, "skip", dst=dst, conflict=conflict, resolution=mode)
    if mode == "fail":
        return Planned(entry_id, src, "error", dst=dst, conflict=conflict, resolution=mode,
                       error=f"{dst} exists already (conflict: fail)" if conflict == "exists" else
                       f"another file of this run goes to {dst} (conflict: fail)")
    if mode == "overwrite" and conflict == "exists":
        claimed.add(dst)
        return Planned(entry_id, src, outcome.type, dst=dst, conflict=conflict, resolution=mode)
    # rename_new (and overwrite of a place an earlier file of this run takes: never replace that one)
    new = free_name(dst, lambda p: p in claimed or exists(p))
    claimed.add(new)
    return Planned(entry_id, src, outcome.type, dst=new, conflict=conflict, resolution="rename_new")


def summary(planned: Iterable[Planned]) -> dict[str, int]:
    """Counts per action, and conflicts."""
    counts: dict[str, int] = {}
    for p in planned:
        counts[p.action] = counts.get(p.action, 0) + 1
        if p.conflict:
            counts["conflicts"] = counts.get("conflicts", 0) + 1
    return counts
