"""`assay plan validate|run|preview|explain|show|schema`, run as a separate process the way a user runs it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import make_tree
from tests.mcp_server.test_cli import assay


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "home" / "user")


@pytest.fixture
def plan_file(tmp_path: Path, tree: Path) -> Path:
    path = tmp_path / "plans" / "media.yaml"
    path.parent.mkdir()
    path.write_text(f"""name: media
sources:
  - name: home
    type: filesystem.index
    config: {{path: "{tree}"}}
rules:
  - name: photos
    when: media_type = image
    outcomes: [{{type: selection_set, selectionSetName: photos}}]
""")
    return path


def test_plan_help_lists_the_actions(tmp_path):
    res = assay(tmp_path, "plan", "--help")
    assert res.returncode == 0
    for action in ("validate", "run", "preview", "explain", "show", "schema"):
        assert action in res.stdout


def test_validate_accepts_a_good_plan_and_locates_problems_in_a_bad_one(tmp_path, tree, plan_file):
    bad = tmp_path / "plans" / "bad.yaml"
    bad.write_text(plan_file.read_text().replace("media_type = image", "media_typ = image"))
    res = assay(tmp_path, "plan", "validate", str(plan_file), str(bad), "--root", str(tree))
    assert res.returncode == 1
    assert f"{plan_file}: ok (plan media: 1 source(s), 1 rule(s))" in res.stdout
    assert f"{bad}: 1 problem(s)" in res.stdout and "unknown field 'media_typ'" in res.stdout
    assert "line 8" in res.stdout


def test_run_executes_the_plan_as_a_prefect_flow_and_reports_counts(tmp_path, tree, plan_file):
    res = assay(tmp_path, "plan", "run", str(plan_file), "--root", str(tree), timeout=300)
    assert res.returncode == 0, res.stderr
    assert "success: 9 entries processed, 3 matched, 3 outcomes applied" in res.stdout
    assert "rule photos: 3 matched; selection_set 3" in res.stdout
    assert "100.0%" in res.stderr and "[####" in res.stderr  # the progress bar


def test_preview_and_explain_print_json(tmp_path, tree, plan_file):
    assay(tmp_path, "index", str(tree), "--root", str(tree), "--no-prefect")
    preview = assay(tmp_path, "plan", "preview", str(plan_file), "--root", str(tree))
    assert preview.returncode == 0, preview.stderr
    assert json.loads(preview.stdout)["rules"][0]["matched"] == 3
    explain = assay(tmp_path, "plan", "explain", str(plan_file), str(tree / "Videos" / "movie.mp4"),
                    "--root", str(tree))
    assert explain.returncode == 0, explain.stderr
    assert json.loads(explain.stdout)["rules"][0]["matched"] is False


def test_show_prints_canonical_yaml_dsl_and_json(tmp_path, plan_file):
    yaml_out = assay(tmp_path, "plan", "show", str(plan_file))
    assert yaml_out.returncode == 0 and "when: media_type = image" in yaml_out.stdout
    dsl_out = assay(tmp_path, "plan", "show", str(plan_file), "--format", "dsl")
    assert dsl_out.returncode == 0 and dsl_out.stdout.startswith("plan media")
    json_out = assay(tmp_path, "plan", "show", str(plan_file), "--format", "json")
    assert json.loads(json_out.stdout)["name"] == "media"


def test_schema_is_a_json_schema(tmp_path):
    res = assay(tmp_path, "plan", "schema")
    assert res.returncode == 0
    schema = json.loads(res.stdout)
    assert schema.get("$schema", "").startswith("https://json-schema.org/") and "properties" in schema
