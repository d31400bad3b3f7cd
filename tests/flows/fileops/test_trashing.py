"""A trashed file or folder keeps what nothing can make again (its set memberships, maps an agent supplied) with its
journal row, and undo puts it back on the entries the restored files get: a file in two sets, a folder of files in
sets, a set deleted meanwhile (skipped and named in the file's result), a trash emptied for good (refused, saying
when); the same number of statements for a folder of 6 members as of 60. On SQLite and PostgreSQL."""

from __future__ import annotations

import os

from pathlib import Path

import pytest
from sqlalchemy import event, insert, select, update

from flows.core.roots import Roots
from flows.fileops import trashing
from flows.fileops.recovery import recover_moves
from flows.fileops.trashing import trash_one
from flows.fileops.undo import undo
from flows.index.indexer import index_tree
from store import file_journal, kept
from store import sets as store_sets
from store.entries import T, iso
from store.models import MapNodeRow, ResourceMapRow
from tests.conftest import BACKENDS, backend_engine
from tests.flows.index.checks import assert_store_consistent

R = ResourceMapRow.__table__
N = MapNodeRow.__table__


@pytest.fixture(scope="module", params=BACKENDS)
def engine(request, tmp_path_factory):
    """One store per backend for the module; each test indexes a tree of its own into it."""
    with backend_engine(request, tmp_path_factory, "assay_trashing") as eng:
        yield eng


@pytest.fixture
def indexed(engine, tree, tmp_path, monkeypatch) -> Path:
    """The test's tree, indexed; files trashed from it go to the trash of a home of the test's own."""
    monkeypatch.setenv("ASSAY_TRASH_HOME", str(tmp_path / "trash-home"))
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    (tmp_path / "trash-home").mkdir()
    index_tree(engine, str(tree), scan_id=1)
    return tree


def set_with(engine, name: str, paths: list[str]) -> None:
    store_sets.create_set(engine, name=name)
    store_sets.modify_members(engine, name=name, operation="add", paths=paths)


def members(engine, name: str) -> list[str]:
    found = store_sets.describe_set(engine, name=name, include_entries=True, limit=1000)["entries"]
    return sorted(e["path"] for e in found)


def entry_id(engine, path: str) -> int | None:
    with engine.connect() as conn:
        return conn.execute(select(T.c.id).where(T.c.path == path)).scalar()


def trash_and_undo(engine, tree: Path, path: str, between=None) -> dict:
    """Trash ``path`` as one tool call, run ``between`` (a change made meanwhile), then undo that call."""
    origin = file_journal.Origin.for_tool("delete-files")
    trash_one(engine, origin, path)
    if between is not None:
        between()
    done = undo(engine, Roots.of([str(tree)]), origin=file_journal.Origin.for_tool("undo"), call_id=origin.call_id)
    assert (done["undone"], done["refused"]) == (1, 0), done
    return done["results"][0]


def test_undo_of_a_trashed_file_puts_it_back_in_both_its_sets(engine, indexed):
    notes = str(indexed / "Photos" / "notes.txt")
    set_with(engine, "file-a", [notes])
    set_with(engine, "file-b", [notes, str(indexed / "Photos" / "photo.jpg")])
    old_id = entry_id(engine, notes)

    def gone_from_both() -> None:
        assert members(engine, "file-a") == [] and members(engine, "file-b") == [str(indexed / "Photos" / "photo.jpg")]
        op = file_journal.history(engine, path=notes)[0]
        with engine.connect() as conn:
            assert kept.counts(conn, op["id"]) == {"memberships": 2, "maps": 0}

    result = trash_and_undo(engine, indexed, notes, between=gone_from_both)
    assert result["restored"] == {"memberships": 2, "maps": 0} and "note" not in result
    assert entry_id(engine, notes) not in (None, old_id)  # a new entry, indexed again, in its old sets
    assert members(engine, "file-a") == [notes]
    assert members(engine, "file-b") == sorted([notes, str(indexed / "Photos" / "photo.jpg")])
    with engine.connect() as conn:
        assert kept.counts(conn, result["operationId"]) == {"memberships": 0, "maps": 0}  # forgotten once restored


def test_undo_of_a_trashed_folder_puts_each_of_its_files_and_folders_back_in_their_sets(engine, indexed):
    many = indexed / "docs" / "many"
    many.mkdir()
    for i in range(40):
        (many / f"f{i:02d}.txt").write_text(f"file {i}")
    index_tree(engine, str(indexed), scan_id=2)
    files = sorted(str(p) for p in (indexed / "docs").rglob("*") if p.is_file())
    folders = [str(indexed / "docs"), str(indexed / "docs" / "deep" / "a")]
    set_with(engine, "folder-files", files)
    set_with(engine, "folder-folders", [*folders, str(indexed / "Photos")])

    result = trash_and_undo(engine, indexed, str(indexed / "docs"))
    assert result["restored"] == {"memberships": len(files) + 2, "maps": 0} and "note" not in result
    assert members(engine, "folder-files") == files
    assert members(engine, "folder-folders") == sorted([*folders, str(indexed / "Photos")])
    assert_store_consistent(engine, str(indexed))


def test_a_set_deleted_meanwhile_is_skipped_and_named_in_the_files_result(engine, indexed):
    readme = str(indexed / "docs" / "readme.md")
    set_with(engine, "stays", [readme])
    set_with(engine, "deleted-meanwhile", [readme])

    def delete_the_set_and_make_another_of_its_name() -> None:
        store_sets.delete_set(engine, name="deleted-meanwhile")
        store_sets.create_set(engine, name="deleted-meanwhile")  # another set: not the one the file was in

    result = trash_and_undo(engine, indexed, readme, between=delete_the_set_and_make_another_of_its_name)
    assert result["status"] == "undone" and result["restored"]["memberships"] == 1
    assert "deleted since" in result["note"] and "deleted-meanwhile" in result["note"]
    assert members(engine, "stays") == [readme] and members(engine, "deleted-meanwhile") == []


def test_undo_of_a_trash_emptied_for_good_is_refused_naming_the_file_and_when(engine, indexed):
    clip = str(indexed / "Videos" / "clip.mov")
    origin = file_journal.Origin.for_tool("delete-files")
    trash_one(engine, origin, clip)
    op = file_journal.of_call(engine, origin.call_id)[0]
    purged_at = 1_800_000_000.0
    with engine.begin() as conn:  # what trash-empty does to the row (store.file_journal: state purged, undone_at)
        conn.execute(update(file_journal.F).where(file_journal.F.c.id == op["id"])
                     .values(state="purged", undone_at=purged_at))
    for dry_run in (True, False):
        done = undo(engine, Roots.of([str(indexed)]), origin=file_journal.Origin.for_tool("undo"),
                    operation_id=op["id"], dry_run=dry_run)
        (result,) = done["results"]
        assert result["status"] == "refused"
        assert result["reason"] == (f"{clip} was emptied from the trash for good on {iso(purged_at)}; "
                                    "nothing is left to bring back")


def test_a_trashing_cut_short_before_its_destination_was_written_is_found_in_the_trash_and_undone(engine, indexed,
                                                                                                  monkeypatch):
    movie = indexed / "Videos" / "movie.mp4"
    body = movie.read_bytes()
    origin = file_journal.Origin.for_tool("delete-files")

    def killed(*_args, **_kw):
        raise RuntimeError("killed after the file went to the trash")

    with monkeypatch.context() as patch, pytest.raises(RuntimeError):
        patch.setattr(trashing, "delete_subtree", killed)
        trash_one(engine, origin, str(movie))
    recover_moves(engine)  # the next start: the file is gone from its place; its trash's info file says where it went
    [row] = file_journal.of_call(engine, origin.call_id)
    assert row["state"] == "done" and row["dst"] and os.path.exists(row["dst"])
    done = undo(engine, Roots.of([str(indexed)]), origin=file_journal.Origin.for_tool("undo"), call_id=origin.call_id)
    assert (done["undone"], done["refused"]) == (1, 0), done
    assert movie.read_bytes() == body and entry_id(engine, str(movie))


def test_a_map_an_agent_supplied_comes_back_with_its_resource_id_and_nodes(engine, indexed):
    readme, report = str(indexed / "docs" / "readme.md"), str(indexed / "docs" / "report_2024.pdf")
    with engine.begin() as conn:
        agent = conn.execute(insert(R).values(resource_id="readme-notes", entry_id=entry_id(engine, readme),
                                              kind="text", origin="agent", title="Notes", created_at=1.0)
                             .returning(R.c.id)).scalar_one()
        conn.execute(insert(N), [{"map_id": agent, "node_id": "n1", "parent_node_id": None, "ordinal": 0,
                                  "title": "Intro", "location_json": "{}"},
                                 {"map_id": agent, "node_id": "n2", "parent_node_id": "n1", "ordinal": 1,
                                  "title": "Detail", "location_json": '{"lines": [2, 3]}'}])
        conn.execute(insert(R).values(resource_id="report-outline", entry_id=entry_id(engine, report),
                                      kind="document", origin="outline", created_at=1.0))
    result = trash_and_undo(engine, indexed, str(indexed / "docs"))
    assert result["restored"] == {"memberships": 0, "maps": 1}
    with engine.connect() as conn:
        row = conn.execute(select(R).where(R.c.resource_id == "readme-notes")).mappings().one()
        nodes = conn.execute(select(N.c.node_id, N.c.parent_node_id, N.c.title, N.c.location_json)
                             .where(N.c.map_id == row["id"]).order_by(N.c.ordinal)).all()
        outline = conn.execute(select(R.c.id).where(R.c.resource_id == "report-outline")).first()
    assert (row["entry_id"], row["origin"], row["title"]) == (entry_id(engine, readme), "agent", "Notes")
    assert [tuple(n) for n in nodes] == [("n1", None, "Intro", "{}"), ("n2", "n1", "Detail", '{"lines": [2, 3]}')]
    assert outline is None  # a map a plan built is made again by the plan, not kept


def statements_to_trash_and_undo(engine, tree: Path, folder: Path) -> tuple[int, dict]:
    """How many SQL statements trashing ``folder`` and undoing that took (an executemany counts once); the result."""
    statements = [0]

    def count(*_args, **_kw) -> None:
        statements[0] += 1

    event.listen(engine, "before_cursor_execute", count)
    try:
        result = trash_and_undo(engine, tree, str(folder))
    finally:
        event.remove(engine, "before_cursor_execute", count)
    return statements[0], result


def test_a_folder_of_60_members_takes_as_many_statements_to_trash_and_bring_back_as_one_of_6(engine, indexed):
    counted: list[int] = []
    for n in (6, 60):
        folder = indexed / f"batch-{n}"
        folder.mkdir()
        for i in range(n):
            (folder / f"{i:03d}.txt").write_text(str(i))
        index_tree(engine, str(indexed), scan_id=3)
        set_with(engine, f"batch-{n}", [str(p) for p in folder.iterdir()])
        statements, result = statements_to_trash_and_undo(engine, indexed, folder)
        assert result["restored"]["memberships"] == n and len(members(engine, f"batch-{n}")) == n
        counted.append(statements)
    assert counted[0] == counted[1], counted
