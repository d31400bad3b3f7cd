"""The `assay` command line, run as a separate process the way a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import make_tree


def cli_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("ASSAY_", "CORS_", "PREFECT_")) or k == "ASSAY_PREFECT_SEED"}
    env.update(ASSAY_DATA_DIR=str(tmp_path / "data"), PREFECT_HOME=str(tmp_path / "prefect"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", **extra)
    return env


def assay(tmp_path: Path, *args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mcp_server.cli", *args], capture_output=True, text=True,
                          env=cli_env(tmp_path, **env), timeout=timeout, cwd=Path(__file__).parents[2])


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    return make_tree(tmp_path / "home" / "user")


def test_help_lists_the_commands(tmp_path):
    res = assay(tmp_path, "--help")
    assert res.returncode == 0
    for text in ("serve", "index", "ASSAY_DATA_DIR", "ASSAY_ROOTS", "CORS_ORIGINS"):
        assert text in res.stdout


def test_no_command_prints_help_and_fails(tmp_path):
    res = assay(tmp_path)
    assert res.returncode == 2 and "usage: assay" in res.stdout


def test_serve_help_lists_the_public_options(tmp_path):
    res = assay(tmp_path, "serve", "--help")
    assert res.returncode == 0
    for option in ("--transport {stdio,http}", "--host", "--port", "--root DIR", "--data-dir DIR", "--config FILE",
                   "default 127.0.0.1", "default 3000", "~/.assay"):
        assert option in res.stdout


def test_index_help_lists_its_options(tmp_path):
    res = assay(tmp_path, "index", "--help")
    assert res.returncode == 0
    for option in ("path", "--force", "--max-age", "--no-prefect", "--root DIR"):
        assert option in res.stdout


def test_index_prints_a_summary_and_draws_progress_on_stderr(tmp_path, tree):
    res = assay(tmp_path, "index", str(tree), "--root", str(tree), "--no-prefect")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("completed: 10 files, 9 directories, 59,638 bytes, 0 removed")
    assert "(job 1)" in res.stdout and "[" not in res.stdout
    assert "] 100.0%" in res.stderr and "#" * 30 in res.stderr
    assert (tmp_path / "data" / "assay.db").exists()


def test_index_roots_from_the_environment(tmp_path, tree):
    res = assay(tmp_path, "index", str(tree / "Photos"), "--no-prefect", ASSAY_ROOTS=str(tree))
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("completed: 4 files, 2 directories")


def test_index_as_a_prefect_flow(tmp_path, tree):
    res = assay(tmp_path, "index", str(tree), "--root", str(tree), timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("completed: 10 files, 9 directories")
    assert "Beginning flow run 'index " in res.stderr and "] 100.0%" in res.stderr
    assert "prefect" not in res.stdout.lower()


def test_index_outside_the_roots_fails_with_a_clear_message(tmp_path, tree):
    res = assay(tmp_path, "index", "/etc", "--root", str(tree), "--no-prefect")
    assert res.returncode != 0
    assert "/etc is outside the allowed roots" in res.stderr and str(tree) in res.stderr and "--root" in res.stderr
    assert res.stdout == "" and "Traceback" not in res.stderr


def test_index_of_a_missing_path_fails(tmp_path, tree):
    res = assay(tmp_path, "index", str(tree / "nope"), "--root", str(tree), "--no-prefect")
    assert res.returncode != 0 and "does not exist" in res.stderr and "Traceback" not in res.stderr


@pytest.mark.parametrize("args, message", [
    (["serve", "--port", "70000"], "port"),
    (["serve", "--transport", "grpc"], "invalid choice: 'grpc'"),
    (["serve", "--root", "/no/such/dir"], "/no/such/dir are not existing directories"),
])
def test_serve_refuses_bad_settings_before_starting(tmp_path, args, message):
    res = assay(tmp_path, *args, timeout=60)
    assert res.returncode == 2 and message in res.stderr and "Traceback" not in res.stderr


def test_bad_config_key_stops_serve_naming_it(tmp_path, tree):
    cfg = tmp_path / "assay.yaml"
    cfg.write_text("server:\n  prot: 3000\n")
    res = assay(tmp_path, "serve", "--config", str(cfg), "--root", str(tree), timeout=60)
    assert res.returncode == 2 and "server.prot" in res.stderr and "server.port" in res.stderr


def test_command_line_calls_leave_a_running_servers_jobs_alone(tmp_path, tree):
    """`assay index` and `assay plan` run beside a server on the same store: the job that server is running stays
    running (they used to mark it failed, as a server does at start with jobs nobody runs any more)."""
    from store import jobs
    from store.engine import get_engine

    (tmp_path / "data").mkdir()
    engine = get_engine(f"sqlite:///{tmp_path / 'data' / 'assay.db'}")
    job = jobs.create_job(engine, root=str(tree))
    jobs.mark_running(engine, job_id=job)
    plan = tmp_path / "p.plan"
    plan.write_text(f"plan p\nsource home index {tree}\nrule r when size > 1KB\n  do selection_set big\n")
    res = assay(tmp_path, "index", str(tree / "Photos"), "--root", str(tree), "--no-prefect")
    assert res.returncode == 0, res.stderr
    res = assay(tmp_path, "plan", "validate", str(plan), "--root", str(tree))
    assert res.returncode == 0, res.stderr + res.stdout
    assert jobs.get_job(engine, job_id=job)["status"] == "running"
    engine.dispose()


def test_classify_draws_progress_prints_a_summary_and_fails_on_errors(tmp_path):
    from examples import mediagen as media

    root = tmp_path / "home" / "pics"
    root.mkdir(parents=True)
    media.jpeg(root / "one.jpg", (320, 240))
    media.pdf(root / "guide.pdf", pages=2)
    assert assay(tmp_path, "index", str(root), "--root", str(root), "--no-prefect").returncode == 0
    res = assay(tmp_path, "classify", str(root), "--root", str(root), "--no-prefect",
                "--operations", "thumbnail", "metadata")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("completed: 2 files, 0 with errors, operations thumbnail, metadata")
    assert "] 100.0%" in res.stderr and "2/2 files" in res.stderr
    assert list((tmp_path / "data" / "cache").rglob("*.jpg"))  # thumbnails in the data dir's cache
    again = assay(tmp_path, "classify", str(root), "--root", str(root), "--no-prefect")
    assert again.returncode == 0 and again.stdout.startswith("completed: 2 files")  # thumbnails known: timelines
    media.truncated_jpeg(root / "broken.jpg")
    assert assay(tmp_path, "index", str(root), "--root", str(root), "--no-prefect").returncode == 0
    bad = assay(tmp_path, "classify", str(root / "broken.jpg"), "--root", str(root), "--no-prefect",
                "--operations", "thumbnail")
    assert bad.returncode == 1 and bad.stdout.startswith("failed: 1 files, 1 with errors")
    assert f"{root / 'broken.jpg'}: thumbnail: " in bad.stdout


def test_classify_refuses_an_unindexed_path_and_an_unknown_operation(tmp_path, tree):
    res = assay(tmp_path, "classify", str(tree), "--root", str(tree), "--no-prefect")
    assert res.returncode == 2 and "not in the index; index it first" in res.stderr
    res = assay(tmp_path, "classify", str(tree), "--root", str(tree), "--operations", "blur")
    assert res.returncode == 2 and "unknown classifier operation 'blur'" in res.stderr
