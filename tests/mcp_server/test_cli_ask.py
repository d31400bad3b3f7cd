"""`assay ask`: the best passages of the semantic index, each as ``rank. path  place  [scores]`` and a one-line
excerpt, a summary on stderr, exit status 0 (found) / 1 (nothing) / 2 (an error, with its code); filters by set,
condition and path. The fake bag-of-words encoder stands in for the model (tests/flows/semantic test the real one)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from flows.semantic.model import Hit
from mcp_server.cli import main
from mcp_server.cli.ask import excerpt, format_hits, hit_place
from tests.flows.semantic.fakes import FakeEncoder
from tests.flows.semantic.test_search import DOCS, write_collection

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def indexed(tmp_path_factory):
    """The semantic search tests' library in a data dir: collection ``default`` (garden, space), set ``reading``
    (roses) with child set ``science`` (orbits)."""
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs
    from store import sets as store_sets
    from store.engine import make_engine

    base = tmp_path_factory.mktemp("ask-cli")
    root, data = base / "library", base / "data"
    for rel, chunks in DOCS.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("\n".join(t for t, _ in chunks) + "\n")
    data.mkdir()
    engine = make_engine(f"sqlite:///{data / 'assay.db'}")
    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
    write_collection(engine, "default", {k: v for k, v in DOCS.items() if not k.startswith("kitchen")}, root)
    store_sets.create_set(engine, name="reading")
    store_sets.create_set(engine, name="science")
    store_sets.add_child(engine, parent="reading", child="science")
    store_sets.modify_members(engine, name="reading", operation="add", paths=[str(root / "garden/roses.md")])
    store_sets.modify_members(engine, name="science", operation="add", paths=[str(root / "space/orbits.pdf")])
    engine.dispose()
    return root, data


@pytest.fixture
def fake(monkeypatch) -> FakeEncoder:
    import flows.semantic.encoder as encoder_module

    encoder = FakeEncoder(model="all-MiniLM-L6-v2")
    monkeypatch.setattr(encoder_module, "get_encoder", lambda model=None, backend=None, device=None: encoder)
    return encoder


def _ask(indexed, capsys, *args: str) -> tuple[int, list[str], str]:
    root, data = indexed
    code = main(["ask", *args, "--root", str(root), "--data-dir", str(data), "--log-level", "WARNING"])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_ask_prints_the_best_passage_first_with_its_place_and_scores(indexed, capsys, fake):
    code, out, err = _ask(indexed, capsys, "a comet orbit crosses planets")
    assert code == 0
    assert out[0].startswith("1. space/orbits.pdf  p. 2  [fused ")
    assert "similarity " in out[0] and "keyword " in out[0]
    assert out[1] == "   A comet orbit crosses the orbits of planets near the star."
    assert out[2].startswith("2. ")
    assert err.startswith(f"{len(out) // 2} hits in collection 'default' (hybrid")


def test_ask_modes_and_limit(indexed, capsys, fake):
    code, out, _ = _ask(indexed, capsys, "prune tomato suckers", "--mode", "keyword", "--limit", "1")
    assert code == 0 and len(out) == 2
    assert out[0].startswith("1. garden/tomatoes.txt  lines 4-6  [keyword ")
    code, out, err = _ask(indexed, capsys, "telescope mirrors galaxies", "--mode", "semantic", "--limit", "2",
                          "--min-score", "0")
    assert code == 0 and out[0].startswith("1. space/orbits.pdf  p. 3  [similarity ") and len(out) == 4
    assert "similarity >= 0.00, " in err
    # without --min-score the cut-off is fitted to the model: the second chunk is too far from the first
    code, out, err = _ask(indexed, capsys, "telescope mirrors galaxies", "--mode", "semantic", "--limit", "2")
    assert code == 0 and out[0].startswith("1. space/orbits.pdf  p. 3  [similarity ") and len(out) == 2
    assert "(fitted to the model)" in err


def test_ask_filters_by_set_condition_and_path(indexed, capsys, fake):
    root, _ = indexed
    query = "summer tomatoes roses star orbits"
    _, out, err = _ask(indexed, capsys, query, "--set", "reading", "--limit", "10")
    assert {line.split()[1] for line in out[::2]} == {"garden/roses.md", "space/orbits.pdf"}
    assert "4 passages passed the filters" in err
    _, out, _ = _ask(indexed, capsys, query, "--where", "extension = .md", "--limit", "10")
    assert {line.split()[1] for line in out[::2]} == {"garden/roses.md"}
    _, out, _ = _ask(indexed, capsys, query, "--path", "garden", "--limit", "10")
    assert {line.split()[1] for line in out[::2]} == {"garden/tomatoes.txt", "garden/roses.md"}
    _, out, _ = _ask(indexed, capsys, query, "--path", str(root / "space"), "--set", "reading", "--limit", "10")
    assert {line.split()[1] for line in out[::2]} == {"space/orbits.pdf"}


def test_nothing_found_exits_1_and_errors_exit_2_with_their_code(indexed, capsys, fake):
    code, out, err = _ask(indexed, capsys, "xylophone", "--mode", "keyword")
    assert code == 1 and out == [] and err.startswith("0 hits in collection 'default'")
    for args, code_name in [(["bread", "--collection", "recipes"], "INDEX_NOT_FOUND"),
                            (["  "], "INVALID_QUERY"),
                            (["x", "--where", "size >"], "INVALID_PARAMS"),
                            (["x", "--set", "nosuch"], "NOT_FOUND"),
                            (["x", "--limit", "0"], "INVALID_PARAMS"),
                            (["x", "--path", "../outside"], "PATH_TRAVERSAL_DETECTED")]:
        code, out, err = _ask(indexed, capsys, *args)
        assert code == 2 and out == [] and code_name in err, (args, err)
        assert err.startswith(f"assay: {code_name}")  # one line; a condition's adds the caret under its column
    _, _, err = _ask(indexed, capsys, "bread", "--collection", "recipes")
    assert "default" in err  # INDEX_NOT_FOUND names the collections that exist


def test_places_scores_and_excerpts_read_well():
    def hit(**kw) -> Hit:
        base = dict(chunk_id=1, entry_id=2, path="/r/a.pdf", collection="default", chunk_index=0, text="x",
                    start=0, end=1, line_start=10, line_end=20, page=None, page_end=None, score=0.5)
        return Hit(**{**base, **kw})

    assert hit_place(hit(page=3, page_end=3)) == "p. 3"
    assert hit_place(hit(page=3, page_end=4)) == "pp. 3-4"
    assert hit_place(hit()) == "lines 10-20" and hit_place(hit(line_end=10)) == "line 10"
    long = "word " * 100
    assert excerpt(long).endswith(" ...") and len(excerpt(long)) <= 164
    assert excerpt("two\n  lines\tof text") == "two lines of text"
    lines = format_hits([hit(semantic_score=0.61, semantic_rank=1, keyword_score=3.2, keyword_rank=2, score=0.0325)],
                        "hybrid", display=lambda p: p.removeprefix("/r/"))
    assert lines == ["1. a.pdf  lines 10-20  [fused 0.0325, similarity 0.610 (#1), keyword 3.2 (#2)]", "   x"]


def test_the_installed_command_exits_with_the_status(indexed):
    root, data = indexed
    env = {**os.environ, "ASSAY_DATA_DIR": str(data), "ASSAY_ROOTS": str(root)}
    done = subprocess.run([sys.executable, "-m", "mcp_server.cli", "ask", "deadhead roses", "--mode", "keyword"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[0].startswith("1. garden/roses.md  lines 1-3  [keyword ")
