"""DocumentPaths: the shown form of paths (relative to their root, the root's name first with several roots) and
the confinement of what callers give (``..``, absolute paths outside, symlinks)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flows.documents.paths import TOP, DocumentPaths
from flows.core.roots import Roots
from store.errors import DocumentError


@pytest.fixture
def library(tmp_path: Path) -> Path:
    root = tmp_path / "lib"
    (root / "games" / "coop").mkdir(parents=True)
    (root / "games" / "coop" / "Gloomhaven.pdf").write_bytes(b"%PDF")
    (root / "notes.md").write_text("# notes")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    os.symlink(outside, root / "escape")
    os.symlink(root / "games", root / "games-link")
    return root


def code_of(call) -> tuple[str, dict]:
    with pytest.raises(DocumentError) as info:
        call()
    return info.value.code, info.value.details


def test_one_root_shows_paths_relative_to_it_and_resolves_them_back(library):
    paths = DocumentPaths(Roots.of([str(library)]), allow_symlinks=False)
    pdf = str(library / "games" / "coop" / "Gloomhaven.pdf")
    assert paths.display(pdf) == "games/coop/Gloomhaven.pdf"
    assert paths.display(str(library)) == ""
    assert paths.collection_of(pdf) == "games/coop"
    assert paths.collection_of(str(library / "notes.md")) == ""
    assert paths.resolve("games/coop/Gloomhaven.pdf", field="path") == pdf
    assert paths.resolve(pdf, field="path") == pdf  # absolute inside the root
    assert paths.resolve("", field="path") == str(library)
    assert paths.resolve("./games/../notes.md", field="path") == str(library / "notes.md")  # stays inside


def test_several_roots_are_named_by_their_directory_made_unique(tmp_path):
    a, b, c = tmp_path / "x" / "books", tmp_path / "y" / "books", tmp_path / "papers"
    for d in (a, b, c):
        d.mkdir(parents=True)
    paths = DocumentPaths(Roots.of([str(a), str(b), str(c)]), allow_symlinks=False)
    assert list(paths.names) == ["books", "books-2", "papers"]
    assert paths.display(str(b / "sub" / "f.pdf")) == "books-2/sub/f.pdf"
    assert paths.display(str(c)) == "papers"
    assert paths.collection_of(str(c)) == TOP
    assert paths.resolve("books-2/sub/f.pdf", field="path") == str(b / "sub" / "f.pdf")
    assert paths.resolve("papers", field="path") == str(c)
    assert paths.resolve("", field="path") == TOP
    code, details = code_of(lambda: paths.resolve("magazines/x.pdf", field="path", not_found="COLLECTION_NOT_FOUND"))
    assert code == "COLLECTION_NOT_FOUND" and details == {"path": "magazines/x.pdf"}


@pytest.mark.parametrize("given", ["../outside/secret.txt", "games/../../outside", "..", "/etc/passwd"])
def test_paths_that_leave_the_roots_are_path_traversal(library, given):
    paths = DocumentPaths(Roots.of([str(library)]), allow_symlinks=False)
    code, details = code_of(lambda: paths.resolve(given, field="path"))
    assert code == "PATH_TRAVERSAL_DETECTED" and details == {"path": given}


def test_a_symlink_below_the_root_is_refused_unless_allowed(library):
    strict = DocumentPaths(Roots.of([str(library)]), allow_symlinks=False)
    for given in ("games-link/coop/Gloomhaven.pdf", str(library / "games-link"), "escape/secret.txt"):
        code, details = code_of(lambda: strict.resolve(given, field="path"))  # noqa: B023 (called at once)
        assert code == "SYMLINK_NOT_ALLOWED" and details == {"path": given}
    lenient = DocumentPaths(Roots.of([str(library)]), allow_symlinks=True)
    assert lenient.resolve("games-link/coop/Gloomhaven.pdf", field="path") == str(
        library / "games" / "coop" / "Gloomhaven.pdf")  # followed to the target, inside the root
    code, _ = code_of(lambda: lenient.resolve("escape/secret.txt", field="path"))
    assert code == "PATH_TRAVERSAL_DETECTED"  # allowed links still may not lead out


def test_a_link_above_the_root_only_spells_the_root_differently(library, tmp_path):
    alias = tmp_path / "alias"
    os.symlink(library, alias)
    paths = DocumentPaths(Roots.of([str(library)]), allow_symlinks=False)
    assert paths.resolve(str(alias / "notes.md"), field="path") == str(library / "notes.md")


def test_a_nul_byte_is_refused(library):
    paths = DocumentPaths(Roots.of([str(library)]), allow_symlinks=False)
    code, _ = code_of(lambda: paths.resolve("notes\x00.md", field="path"))
    assert code == "PATH_TRAVERSAL_DETECTED"
