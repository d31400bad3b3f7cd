"""`assay map FILE` prints a file's citation map (and stores it); `assay cite ADDRESS` resolves an address as the
resolve tool does, prints the address, the source's hash and the output, copies it with -o; exit status 0, or 2 with
the error's code and message on stderr. One library per module: a 5-page PDF with an outline, Markdown with
headings, two tones separated by a silence."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from examples.mediagen import citations as citations_media
from mcp_server.cli import main
from mcp_server.cli.cite import copy_output
from mcp_server.cli.map import format_map

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is not installed")


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    from flows.index.flow import run_index_job
    from store import jobs as store_jobs
    from store.engine import make_engine

    base = tmp_path_factory.mktemp("cite-cli")
    root, data = base / "library", base / "data"
    citations_media.pdf_outline(root / "book.pdf", pages=5, toc=[[1, "One", 1], [1, "Two", 2], [2, "Deep", 3]])
    citations_media.markdown_headings(root / "notes.md")
    citations_media.audio_with_silences(root / "talk.wav", tones=(1.0, 1.0), gap=1.0)
    data.mkdir()
    engine = make_engine(f"sqlite:///{data / 'assay.db'}")
    run_index_job(engine, job_id=store_jobs.create_job(engine, root=str(root)), root=str(root))
    engine.dispose()
    return root, data


def run(library, capsys, *args: str) -> tuple[int, str, str]:
    root, data = library
    code = main([*args, "--root", str(root), "--data-dir", str(data), "--log-level", "WARNING"])
    out, err = capsys.readouterr()
    return code, out, err


def test_map_prints_the_tree_with_each_nodes_place_and_address(library, capsys):
    root, _ = library
    code, out, _ = run(library, capsys, "map", str(root / "book.pdf"))
    assert code == 0
    lines = out.splitlines()
    assert lines[0].startswith("book  document  'Outlined Book'  (outline, ")
    assert lines[1:] == ["  one  One  p. 1  doc://book#pages=1", "  two  Two  pp. 2-5  doc://book#pages=2-5",
                         "    two.deep  Deep  pp. 3-5  doc://book#pages=3-5"]
    code, out, _ = run(library, capsys, "map", str(root / "notes.md"), "--strategy", "windows", "--window", "10",
                       "--json")
    assert code == 0
    exported = json.loads(out)
    assert exported["resource_id"] == "notes" and [n["location"]["lines"] for n in exported["nodes"]] == [[1, 10],
                                                                                                           [11, 20]]


def test_cite_prints_the_address_hash_and_output_and_copies_it(library, capsys, tmp_path):
    import pymupdf

    run(library, capsys, "map", str(library[0] / "book.pdf"))
    target = tmp_path / "excerpt.pdf"
    target.write_bytes(b"an older excerpt")  # replaced whole
    code, out, err = run(library, capsys, "cite", "doc://book#pages=2-3", "-o", str(target))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "address  doc://book#pages=2-3"
    assert lines[1] == f"source   {library[0] / 'book.pdf'}" and lines[2].startswith("hash     xxh128:")
    assert lines[3].startswith(f"output   {target}  (application/pdf, ")
    with pymupdf.open(target) as doc:
        assert [p.get_text().strip() for p in doc] == ["page 2", "page 3"]
    assert [p.name for p in tmp_path.iterdir()] == ["excerpt.pdf"]  # no temporary file left

    code, out, _ = run(library, capsys, "cite", "doc://book#pages=2-3", "--json")
    answer = json.loads(out)
    assert code == 0 and answer["cached"] is True and answer["source_hash"] == lines[2].split()[1]
    assert Path(answer["output_path"]).read_bytes() == target.read_bytes()

    code, out, _ = run(library, capsys, "cite", "text://notes#lines=1-3", "--virtual")
    assert code == 0 and out.splitlines()[0] == "address  text://notes#lines=1-3" and "output" not in out


@pytest.mark.parametrize("args, code_text", [
    (["cite", "doc://book#pages=4-9"], "INVALID_ADDRESS"),
    (["cite", "image://book#bbox=0.1,0.2,0.3"], "INVALID_ADDRESS"),
    (["cite", "doc://nobody#pages=1"], "RESOURCE_NOT_FOUND"),
    (["cite", "doc://book#pages=1", "--virtual", "-o", "x.pdf"], "INVALID_PARAMS"),
])
def test_a_refused_citation_exits_2_with_the_code_on_stderr(library, capsys, args, code_text):
    run(library, capsys, "map", str(library[0] / "book.pdf"))
    code, out, err = run(library, capsys, *args)
    assert code == 2 and out == ""
    assert err.startswith(f"assay: {code_text}: ")


def test_copy_output_leaves_nothing_behind_when_it_fails(tmp_path):
    with pytest.raises(FileNotFoundError):
        copy_output(str(tmp_path / "missing.pdf"), str(tmp_path / "out.pdf"))
    assert list(tmp_path.iterdir()) == []


def test_format_map_shows_times_and_regions():
    lines = format_map({"resource_id": "talk", "type": "video", "title": "Talk", "source_path": "/x/talk.mp4",
                        "metadata": {"origin": "chapters"},
                        "nodes": [{"id": "intro", "title": "Intro", "location": {"modality": "video", "start": 0,
                                                                                 "end": 12.5}, "children": []},
                                  {"id": "box", "location": {"modality": "image", "bbox": [0.1, 0.2, 0.5, 0.6]}}]})
    assert lines == ["talk  video  'Talk'  (chapters, /x/talk.mp4)", "  intro  Intro  0-12.5 s",
                     "  box    bbox 0.1,0.2,0.5,0.6"]


def test_audio_is_mapped_by_its_silences_and_cited_as_a_clip(library, capsys, tmp_path):
    code, out, _ = run(library, capsys, "map", str(library[0] / "talk.wav"), "--json")
    talk = json.loads(out)
    assert code == 0 and talk["type"] == "audio" and talk["metadata"]["origin"] == "silences"
    assert len(talk["nodes"]) == 2 and talk["nodes"][0]["location"]["start"] == pytest.approx(0, abs=0.1)
    target = tmp_path / "tone.wav"
    code, out, err = run(library, capsys, "cite", "audio://talk#t=00:02-00:03", "-o", str(target))
    assert code == 0, err
    assert out.splitlines()[0] == "address  audio://talk#t=2-3"
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "format=duration", "-of", "json", str(target)],
                           capture_output=True, text=True, check=True)
    assert float(json.loads(probe.stdout)["format"]["duration"]) == pytest.approx(1.0, abs=0.1)
