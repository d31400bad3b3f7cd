"""Every plan in examples/plans parses, prints back to itself as YAML and DSL, and runs on the example corpus with
the results its comments promise."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsl import parse_plan_file, parse_plan_text, plan_to_dsl, plan_to_yaml
from flows.plans.service import PlanService
from flows.core.roots import Roots
from store import sets as store_sets
from store.engine import make_engine

ROOT = Path(__file__).resolve().parent.parent
PLANS = ROOT / "examples" / "plans"
FILES = sorted(p for p in PLANS.iterdir() if p.suffix in (".yaml", ".yml", ".json", ".plan"))

pytestmark = pytest.mark.skipif(shutil.which("ffmpeg") is None, reason="ffmpeg is needed to generate the corpus")


def test_there_are_example_plans_in_every_format():
    assert {p.suffix for p in FILES} >= {".yaml", ".json", ".plan"} and len(FILES) >= 5


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_example_plan_parses_and_round_trips(path):
    plan = parse_plan_file(path)
    assert parse_plan_text(plan_to_yaml(plan), format="yaml") == plan
    assert parse_plan_text(plan_to_dsl(plan), format="dsl") == plan


@pytest.fixture(scope="module")
def workspace(tmp_path_factory) -> Path:
    """examples/plans beside a freshly generated corpus, as in the repository (plans name ../corpus)."""
    base = tmp_path_factory.mktemp("examples")
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "generate_corpus.py"), str(base / "corpus")],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    shutil.copytree(PLANS, base / "plans")
    return base


@pytest.fixture
def service(workspace, tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    svc = PlanService(engine, Roots.of([str(workspace / "corpus")]), use_prefect=False)
    yield svc
    svc.shutdown()
    engine.dispose()


def sets_of(engine) -> dict[str, list[str]]:
    out = {}
    for s in store_sets.list_sets(engine):
        found = store_sets.describe_set(engine, name=s["name"], include_entries=True, limit=1000)
        out[s["name"]] = sorted(Path(e["path"]).name for e in found["entries"])
    return out


EXPECTED = {
    "media-library.yaml": {
        "photos-2023": ["IMG_0412.jpg", "IMG_0413.jpg", "IMG_0420.jpg"],
        "photos-2024": ["DSC_1001.jpg", "DSC_1002.jpg", "birthday cake.jpg"],
        "videos": ["lecture_with_chapters.mp4", "test_pattern_short.mp4"],
        "big-files": ["lecture_with_chapters.mp4", "old-laptop-disk-2021.img", "tone_440hz.wav"],
    },
    "papers.json": {
        "papers": ["alpine_birds_field_guide.pdf", "annual_report_2023.pdf", "annual_report_2024.pdf",
                   "sourdough_handbook.pdf"],
    },
    "recent-notes.plan": {
        "recent-notes": ["meeting-2024-01-15.md", "todo.txt"],
        "recent-pdfs": ["annual_report_2023.pdf", "annual_report_2024.pdf"],
        "needs-review": ["alpine_birds_field_guide.pdf", "café-menü.md", "reading-list.md", "report draft (copy).txt",
                         "report draft.txt", "sourdough_handbook.pdf", "trip-plan-alps.md"],
    },
    "tidy.yaml": {
        "unfinished-downloads": ["photos-2019-backup.zip.part"],
        "copies": ["report draft (copy).txt"],
        "stale-drafts": ["report draft (copy).txt", "report draft.txt"],
        "review": ["report draft (copy).txt"],
    },
    "inbox-watch.yaml": {},
    "inbox-sort.yaml": {},  # the inbox is empty: nothing moves (tests/flows/plans/test_inbox_sort.py moves files)
    "semantic-shelf.plan": {  # labelled and picked on the vectors the embed rule before them stored, in one run
        "reports": ["annual_report_2023.pdf", "annual_report_2024.pdf"],
        "birds": ["alpine_birds_field_guide.pdf"],
        "baking": ["sourdough_handbook.pdf"],
        "about-solar": ["annual_report_2023.pdf", "annual_report_2024.pdf"],
    },
    "photo-catalog.yaml": {  # selected on what the classifier rule before them extracted, in the same run
        "canon": ["IMG_0412.jpg", "IMG_0413.jpg", "IMG_0420.jpg"],
        "phone": ["birthday cake.jpg"],
        "narrow": ["IMG_0420.jpg", "birthday cake.jpg"],
        "identical-photos": None,  # no two photos are the same file: the set is never made
    },
    "reading-room.plan": {  # selected on the text the extract rule before them stored, in the same run
        "mentions-nas": ["meeting-2024-01-15.md"],
        "drafts": ["report draft (copy).txt", "report draft.txt"],
        "handbooks": ["alpine_birds_field_guide.pdf", "sourdough_handbook.pdf"],
    },
    "citation-maps.plan": {  # the files whose maps were built (outline, headings, chapters or windows)
        "outlined": ["alpine_birds_field_guide.pdf", "annual_report_2023.pdf", "annual_report_2024.pdf",
                     "sourdough_handbook.pdf"],
        "headed": ["café-menü.md", "meeting-2024-01-15.md", "reading-list.md", "trip-plan-alps.md"],
        "timed": ["lecture_with_chapters.mp4", "test_pattern_short.mp4", "tone_440hz.wav",
                  "voice-memo-2024-03-08.mp3"],
    },
    "media-metadata.plan": {
        "long-media": ["lecture_with_chapters.mp4"],
        "long-documents": ["alpine_birds_field_guide.pdf", "annual_report_2024.pdf"],
        "helios-reports": ["annual_report_2023.pdf", "annual_report_2024.pdf"],
    },
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_plan_runs_on_the_example_corpus(service, workspace, name):
    plan = parse_plan_file(workspace / "plans" / name).with_base_dir(str(workspace / "plans"))
    service.save(plan, create=True)
    row = service.execute(plan, wait=True)
    assert row["status"] in ("success", "partial"), row["error_message"]
    got = sets_of(service.engine)
    for set_name, members in EXPECTED[name].items():
        assert got.get(set_name) == members, set_name
    if service.watching is not None:
        service.watching.stop(plan.name)
