"""Where a file outcome puts each file: templates over name parts, columns and metadata; relative destinations under
the file's root; folders; conflicts resolved by each mode; a missing field or a path outside the roots is that file's
error; the same plan read twice gives the same answer (what a preview shows is what the run does)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from dsl.outcomes import CopyOutcome, MoveOutcome, RenameOutcome, TrashOutcome
from flows.fileops import destinations
from flows.index.indexer import index_tree
from store.entries import T
from store.models import MetadataValue

MV = MetadataValue.__table__


@pytest.fixture
def indexed(engine, tree):
    os.utime(tree / "docs" / "report_2024.pdf", (0, time.mktime((2021, 3, 4, 12, 0, 0, 0, 0, -1))))
    index_tree(engine, str(tree), scan_id=1)
    return tree


def rows(engine, *paths: Path) -> list:
    with engine.connect() as conn:
        found = {r["path"]: r for r in conn.execute(select(T).where(T.c.path.in_([str(p) for p in paths])))
                 .mappings()}
    return [found[str(p)] for p in paths]


def test_a_folder_destination_keeps_the_name_under_the_files_root_and_dates_format(engine, roots, indexed):
    [planned] = destinations.plan(engine, roots, MoveOutcome(to="Archive/{mtime:%Y}/"),
                                  rows(engine, indexed / "docs" / "report_2024.pdf"))
    assert (planned.action, planned.dst) == ("move", str(indexed / "Archive" / "2021" / "report_2024.pdf"))


def test_name_parts_and_metadata_with_a_fallback(engine, roots, indexed):
    beach, sunset = rows(engine, indexed / "Photos" / "vacation" / "beach.jpg",
                         indexed / "Photos" / "vacation" / "sunset.jpg")
    with engine.begin() as conn:
        conn.execute(insert(MV), [{"entry_id": beach["id"], "key": "exif.Model", "text_value": "X100"}])
    out = destinations.plan(engine, roots, CopyOutcome(to="By camera/{exif.Model|unknown}/{parent}-{stem}.{extension}"),
                            [beach, sunset])
    assert [p.dst for p in out] == [str(indexed / "By camera" / "X100" / "vacation-beach.jpg"),
                                    str(indexed / "By camera" / "unknown" / "vacation-sunset.jpg")]
    assert [p.action for p in out] == ["copy", "copy"]


def test_a_field_the_file_lacks_without_a_fallback_is_that_files_error(engine, roots, indexed):
    [planned] = destinations.plan(engine, roots, MoveOutcome(to="{exif.Model}/"),
                                  rows(engine, indexed / "docs" / "readme.md"))
    assert planned.action == "error" and "exif.Model" in planned.error and planned.dst is None


def test_a_destination_outside_the_roots_is_refused_for_that_file(engine, roots, indexed):
    [planned] = destinations.plan(engine, roots, MoveOutcome(to="/tmp/elsewhere/"),
                                  rows(engine, indexed / "docs" / "readme.md"))
    assert planned.action == "error" and "outside the allowed roots" in planned.error
    [up] = destinations.plan(engine, roots, MoveOutcome(to="../../out/"), rows(engine, indexed / "docs" / "readme.md"))
    assert up.action == "error"


@pytest.mark.parametrize("mode, action, dst_name", [("skip", "skip", "readme.md"),
                                                    ("rename_new", "move", "readme (2).md"),
                                                    ("overwrite", "move", "readme.md"),
                                                    ("fail", "error", "readme.md")])
def test_each_conflict_mode_with_a_file_already_there(engine, roots, indexed, mode, action, dst_name):
    (indexed / "Photos" / "readme.md").write_text("already here")
    [planned] = destinations.plan(engine, roots, MoveOutcome(to="Photos/", conflict=mode),
                                  rows(engine, indexed / "docs" / "readme.md"))
    assert (planned.action, planned.conflict, planned.dst) == (action, "exists", str(indexed / "Photos" / dst_name))


def test_two_files_meant_for_one_place_conflict_as_on_disk(engine, roots, indexed):
    two = rows(engine, indexed / "Photos" / "notes.txt", indexed / "docs" / "deep" / "a" / "b" / "c.txt")
    out = destinations.plan(engine, roots, MoveOutcome(to="All/{extension}.x", conflict="rename_new"), two)
    assert [p.dst for p in out] == [str(indexed / "All" / "txt.x"), str(indexed / "All" / "txt (2).x")]
    assert out[1].conflict == "taken"
    skipped = destinations.plan(engine, roots, MoveOutcome(to="All/{extension}.x", conflict="overwrite"), two)
    assert skipped[1].dst == str(indexed / "All" / "txt (2).x")  # never replaces what this run just put there


def test_rename_stays_in_the_folder_and_a_same_name_is_unchanged(engine, roots, indexed):
    readme = rows(engine, indexed / "docs" / "readme.md")
    [renamed] = destinations.plan(engine, roots, RenameOutcome(name="{stem}-old.{extension}"), readme)
    assert renamed.dst == str(indexed / "docs" / "readme-old.md")
    [same] = destinations.plan(engine, roots, RenameOutcome(name="{name}"), readme)
    assert same.action == "unchanged"
    with pytest.raises(ValueError, match="stays in the file's folder"):
        RenameOutcome(name="sub/{name}")


def test_trash_plans_every_file(engine, roots, indexed):
    out = destinations.plan(engine, roots, TrashOutcome(), rows(engine, indexed / "docs" / "readme.md"))
    assert [(p.action, p.dst) for p in out] == [("trash", None)]
    assert destinations.summary(out) == {"trash": 1}


def test_unknown_template_fields_are_refused_when_the_plan_is_read():
    with pytest.raises(ValueError, match="does not know"):
        MoveOutcome(to="{nosuchfield}/")


def test_free_name_counts_up():
    taken = {"/r/a.txt", "/r/a (2).txt"}
    assert destinations.free_name("/r/a.txt", taken.__contains__) == "/r/a (3).txt"
    assert destinations.free_name("/r/README", {"/r/README"}.__contains__) == "/r/README (2)"
