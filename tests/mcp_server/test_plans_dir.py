"""--plans-dir: plan files loaded at start, reloaded on change, invalid ones reported, MCP edits written back."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from mcp_server.app import AssayApp, build_server
from mcp_server.config import Settings
from store import plans as store_plans
from tests.conftest import call, wait_for



@pytest.fixture
def plans_dir(tmp_path: Path, tree: Path) -> Path:
    d = tmp_path / "plans"
    d.mkdir()
    (d / "photos.yaml").write_text("""name: photos
sources:
  - {name: photos, type: filesystem.index, config: {path: ../home/user/Photos}}
rules:
  - name: jpgs
    when: extension = .jpg
    outcomes: [{type: selection_set, selectionSetName: jpgs}]
""")
    (d / "broken.yaml").write_text("name: broken\nsources: []\n")
    (d / "notes.txt").write_text("not a plan file")
    return d


@pytest.fixture
def dir_app(tmp_path: Path, tree: Path, data_dir: Path, plans_dir: Path):
    app = AssayApp.create(Settings(data_dir=data_dir, roots=[str(tree)], use_prefect=False, plans_dir=plans_dir))
    app.start_background()
    yield app
    app.close()
    from store.engine import dispose_engines

    dispose_engines()


def test_plan_files_are_loaded_and_bad_ones_reported(dir_app, plans_dir):
    names = [p["name"] for p in store_plans.list_plans(dir_app.engine)]
    assert names == ["photos"]
    errors = dir_app.plans.plans_dir.errors()
    assert errors[0]["file"].endswith("broken.yaml") and "at least one source" in errors[0]["error"]


def test_relative_source_paths_are_relative_to_the_plan_file(dir_app, tree):
    row = dir_app.plans.execute(dir_app.plans.load("photos"), wait=True)
    assert row["status"] == "success" and row["entries_matched"] == 3


async def test_plans_created_over_mcp_are_written_back_as_yaml(dir_app, plans_dir, tree):
    from mcp import Client

    async with Client(build_server(dir_app)) as client:
        await call(client, "plan-create", {"name": "videos", "sources": [
            {"name": "v", "type": "filesystem.index", "config": {"path": str(tree / "Videos")}}],
            "conditions": "media_type = video"})
        text = (plans_dir / "videos.yaml").read_text()
        assert "name: videos" in text and "media_type = video" in text
        await call(client, "plan-update", {"name": "photos", "description": "only jpgs"})
        assert "description: only jpgs" in (plans_dir / "photos.yaml").read_text()
        listed = await call(client, "plan-list")
        assert listed["file_errors"][0]["file"].endswith("broken.yaml")
        await call(client, "plan-delete", {"name": "videos"})
        assert not (plans_dir / "videos.yaml").exists()


def test_editing_a_file_reloads_its_plan_and_fixing_a_bad_one_loads_it(dir_app, plans_dir, tree):
    photos = plans_dir / "photos.yaml"
    photos.write_text(photos.read_text().replace("extension = .jpg", "extension = .txt"))
    wait_for(lambda: store_plans.get_plan(dir_app.engine, name="photos")["definition"]["rules"][0]["when"]["value"]
             == ".txt")
    (plans_dir / "broken.yaml").write_text(
        f"name: broken\nsources: [{{name: s, type: filesystem.index, config: {{path: \"{tree}\"}}}}]\n")
    wait_for(lambda: store_plans.find_plan(dir_app.engine, name="broken"))
    assert dir_app.plans.plans_dir.errors() == []
    photos.unlink()
    wait_for(lambda: store_plans.find_plan(dir_app.engine, name="photos") is None)


def test_a_second_file_with_a_taken_plan_name_is_reported_not_loaded(dir_app, plans_dir):
    before = store_plans.get_plan(dir_app.engine, name="photos")
    (plans_dir / "copy.yaml").write_text((plans_dir / "photos.yaml").read_text().replace(".jpg", ".png"))
    wait_for(lambda: any(e["file"].endswith("copy.yaml") for e in dir_app.plans.plans_dir.errors()))
    error = next(e for e in dir_app.plans.plans_dir.errors() if e["file"].endswith("copy.yaml"))
    assert "plan name 'photos' is already defined in photos.yaml" in error["error"]
    assert store_plans.get_plan(dir_app.engine, name="photos")["definition"] == before["definition"]
    (plans_dir / "copy.yaml").unlink()
    time.sleep(1.0)  # give the watcher time to act on the deletion (it must not delete the plan)
    assert store_plans.find_plan(dir_app.engine, name="photos") is not None
