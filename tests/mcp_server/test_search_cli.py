"""`assay search`: matches printed like grep (path:line: text, context as path-line- text, -- between groups), a
summary on stderr with totals and documents not indexed yet, exit status 0 / 1 / 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from examples.mediagen import documents as documents_media
from flows.documents.model import LineMatch, SearchOutcome
from mcp_server.cli import main
from mcp_server.cli.search import format_matches, search_summary

ROOT = Path(__file__).resolve().parents[2]


def test_matches_print_like_grep_with_context_merged_and_groups_separated():
    matches = [
        LineMatch("a.md", 3, "third", context_before=["first", "second"], context_after=["fourth"]),
        LineMatch("a.md", 4, "fourth", context_before=["second", "third"], context_after=["fifth"]),
        LineMatch("a.md", 9, "ninth", context_before=["eighth"], context_after=[]),
        LineMatch("b/c.pdf", 1, "top", context_before=[], context_after=["next"]),
    ]
    assert format_matches(matches) == [
        "a.md-1- first", "a.md-2- second", "a.md:3: third", "a.md:4: fourth", "a.md-5- fifth",
        "--", "a.md-8- eighth", "a.md:9: ninth",
        "--", "b/c.pdf:1: top", "b/c.pdf-2- next",
    ]


def test_without_context_there_are_no_separators():
    matches = [LineMatch("a.md", 3, "x"), LineMatch("a.md", 7, "y"), LineMatch("b.md", 1, "z")]
    assert format_matches(matches) == ["a.md:3: x", "a.md:7: y", "b.md:1: z"]


def test_the_summary_says_what_may_be_missing():
    found = SearchOutcome("q", [LineMatch("a.md", 1, "x")] * 2, total_matches=7, truncated=True,
                          pending_documents=3, failed_documents=1, elapsed_ms=4)
    text = search_summary(found)
    assert text.startswith("7 matching lines, the first 2 shown (1 document)")
    assert "3 documents not indexed yet" in text and "1 document could not be read" in text
    assert search_summary(SearchOutcome("q", [], 0, False)).startswith("0 matching lines (")


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """A library indexed and extracted (the real extraction pool) into a data dir, and one file left unextracted."""
    from flows.documents.executor import extract_rows, options_for
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs
    from store.engine import make_engine
    from store.entries import T as E

    base = tmp_path_factory.mktemp("search-cli")
    root, data = base / "library", base / "data"
    documents_media.pdf_with_outline(root / "games" / "rules.pdf")
    documents_media.markdown(root / "notes" / "cards.md")
    documents_media.encrypted_pdf(root / "locked.pdf")
    engine = make_engine(f"sqlite:///{data / 'assay.db'}")
    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
    with engine.connect() as conn:
        rows = conn.execute(E.select().where(E.c.kind == "file")).mappings().all()
    result = extract_rows(engine, rows, options=options_for(None))
    assert result.applied == 2 and len(result.errors) == 1, result
    (root / "notes" / "later.md").write_text("squares written after the extraction\n")
    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
    engine.dispose()
    return root, data


def _search(indexed, capsys, *args: str) -> tuple[int, list[str], str]:
    root, data = indexed
    code = main(["search", *args, "--root", str(root), "--data-dir", str(data), "--log-level", "WARNING"])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def _line_of(indexed, rel: str, words: str) -> int:
    """The document line holding ``words``, as the store numbers it (the CLI must print the same number)."""
    from store import documents as store_docs
    from store.engine import make_engine
    from store.entries import get_entry

    root, data = indexed
    engine = make_engine(f"sqlite:///{data / 'assay.db'}")
    try:
        entry = get_entry(engine, path=str(root / rel))
        return next(n for n, text, _page, _ocr in store_docs.entry_lines(engine, entry["id"]) if words in text)
    finally:
        engine.dispose()


def test_a_search_prints_matches_and_a_summary_and_exits_0(indexed, capsys):
    code, out, err = _search(indexed, capsys, "squares -diagonal", "--context", "0")
    line = _line_of(indexed, "games/rules.pdf", "four squares")
    assert code == 0
    assert out == [f"games/rules.pdf:{line}: Movement allows a figure to move up to four squares."]
    assert "1 matching line in 1 document" in err
    assert "1 document not indexed yet" in err and "1 document could not be read" in err


def test_context_lines_and_scope(indexed, capsys):
    code, out, _ = _search(indexed, capsys, "shuffle deck", "--context", "1", "--scope", "notes")
    line = _line_of(indexed, "notes/cards.md", "Shuffle the deck")
    assert code == 0
    assert out[1] == f"notes/cards.md:{line}: Shuffle the deck before dealing."
    assert out[0].startswith(f"notes/cards.md-{line - 1}-") and out[2].startswith(f"notes/cards.md-{line + 1}-")
    code, out, _ = _search(indexed, capsys, "shuffle deck", "--scope", "games/rules.pdf")
    assert code == 1 and out == []


def test_nothing_found_exits_1_and_errors_exit_2_with_their_code(indexed, capsys):
    code, out, err = _search(indexed, capsys, "xylophone")
    assert code == 1 and out == [] and err.startswith("0 matching lines")
    code, _, err = _search(indexed, capsys, "(unclosed")
    assert code == 2 and "INVALID_QUERY" in err
    code, _, err = _search(indexed, capsys, "dice", "--scope", "../outside")
    assert code == 2 and "PATH_TRAVERSAL_DETECTED" in err
    code, _, err = _search(indexed, capsys, "dice", "--scope", "no/such/folder")
    assert code == 2 and "SCOPE_NOT_FOUND" in err


def test_the_installed_command_exits_with_the_status(indexed):
    root, data = indexed
    env = {**os.environ, "ASSAY_DATA_DIR": str(data), "ASSAY_ROOTS": str(root)}
    done = subprocess.run([sys.executable, "-m", "mcp_server.cli", "search", "dice", "--context", "0"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert all(line.startswith("games/rules.pdf:") for line in done.stdout.splitlines()) and done.stdout
