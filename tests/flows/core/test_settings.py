"""The one settings model: its layers, the process's settings read once (and again when the environment changes),
and what a flow run finds its store and roots by when its parameters are all it got."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from flows.core import settings as core
from flows.core.settings import AssaySettings, ConfigError, current, export_for_runs, install, run_settings


@pytest.fixture(autouse=True)
def nothing_installed(monkeypatch):
    """Each test starts with no installed settings; the process's are put back afterwards."""
    monkeypatch.setattr(core, "_installed", None)
    monkeypatch.setattr(core, "_cache", None)
    for name in core.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


def test_defaults_are_the_data_dir_store_and_the_home_directory() -> None:
    settings = run_settings()
    assert settings.store_url == f"sqlite:///{Path('~/.assay').expanduser() / 'assay.db'}"
    assert settings.effective_roots().paths == (os.path.realpath(Path.home()),)


def test_roots_are_split_on_the_path_separator(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASSAY_ROOTS", f"{tmp_path / 'a'}{os.pathsep} {os.pathsep}{tmp_path / 'b'}")
    assert current().roots == [str(tmp_path / "a"), str(tmp_path / "b")]


def test_a_serving_process_exports_its_store_and_roots_for_the_runs_it_starts(monkeypatch, tmp_path: Path) -> None:
    for name in ("ASSAY_DATA_DIR", "ASSAY_DATABASE_URL", "ASSAY_ROOTS", "ASSAY_OCR", "ASSAY_EMBED_BATCH"):
        monkeypatch.setenv(name, "")  # so the test's own values are undone afterwards
    install(AssaySettings(data_dir=tmp_path, documents={"ocr": False}, semantic={"batch_size": 8}))
    export_for_runs(data_dir=tmp_path, store_url="sqlite:///x.db", roots=[str(tmp_path)])
    assert run_settings().store_url == "sqlite:///x.db"
    assert run_settings().effective_roots().paths == (os.path.realpath(tmp_path),)
    assert (os.environ["ASSAY_OCR"], os.environ["ASSAY_EMBED_BATCH"]) == ("off", "8")  # a subprocess's run sees them
    install(None)
    assert current().documents.ocr is False and current().semantic.batch_size == 8


def test_values_over_environment_over_yaml_over_defaults(tmp_path: Path) -> None:
    config = tmp_path / "assay.yaml"
    config.write_text("documents: {ocr: false, ocr_language: deu, timeout: 5}\nsemantic: {model_cache: ~/cache}\n")
    env = {"ASSAY_OCR_LANGUAGE": "fra", "ASSAY_DOCUMENT_TIMEOUT": "7"}
    settings = AssaySettings.load({"documents": {"timeout": 9}}, config_file=config, env=env)
    assert settings.documents.ocr is False  # the file's
    assert settings.documents.ocr_language == "fra"  # the environment's over the file's
    assert settings.documents.timeout == 9  # the values given over both
    assert settings.documents.max_read_chars == 100_000  # the default
    assert settings.semantic.model_cache == Path("~/cache").expanduser()


def test_a_model_built_from_values_reads_nothing(monkeypatch) -> None:
    monkeypatch.setenv("ASSAY_OCR", "off")
    monkeypatch.setenv("ASSAY_DATABASE_URL", "sqlite:///elsewhere.db")
    settings = AssaySettings(port=3999)
    assert settings.documents.ocr is True and settings.database.url is None and settings.server.port == 3999


def test_the_command_lines_flat_names_are_put_in_their_sections() -> None:
    settings = AssaySettings(database_url="sqlite:///a.db", plans_dir="~/plans", use_prefect=False, prefect_port=0,
                             tool_groups=["session"])
    assert settings.database.url == settings.database_url == "sqlite:///a.db"
    assert settings.plans.dir == settings.plans_dir == Path("~/plans").expanduser()
    assert (settings.prefect.enabled, settings.prefect.port, settings.tools.groups) == (False, 0, ["session"])
    copy = settings.model_copy(update={"plans_dir": None, "port": 4000})
    assert copy.plans.dir is None and copy.server.port == 4000 and copy.database.url == "sqlite:///a.db"


@pytest.mark.parametrize("variable, text, setting", [
    ("ASSAY_OCR", "maybe", "documents.ocr"),
    ("ASSAY_EMBED_BATCH", "0", "semantic.batch_size"),
    ("ASSAY_EMBED_BACKEND", "tensorflow", "semantic.backend"),
    ("ASSAY_DOCUMENT_MAX_BYTES", "1.5", "documents.max_bytes"),
    ("ASSAY_CLASSIFY_POOL", "forks", "classify.pool"),
])
def test_a_bad_variable_is_named_with_its_value_and_setting(variable, text, setting) -> None:
    with pytest.raises(ConfigError) as err:
        AssaySettings.load(env={variable: text})
    assert f"{setting} ({variable}={text!r})" in err.value.message and err.value.field == variable


def test_blank_variables_are_unset_and_words_are_read_in_any_case() -> None:
    settings = AssaySettings.load(env={"ASSAY_OCR": " ", "ASSAY_EMBED_BACKEND": "ONNX", "ASSAY_ALLOW_SYMLINKS": "On"})
    assert settings.documents.ocr is True and settings.semantic.backend == "onnx"
    assert settings.documents.allow_symlinks is True


def test_the_process_settings_are_parsed_once_and_again_when_the_environment_changes(monkeypatch) -> None:
    first = current()
    assert current() is first
    monkeypatch.setenv("ASSAY_SEARCH_EF", "64")
    assert current() is not first and current().semantic.search_ef == 64


def test_installed_settings_hold_until_a_variable_changes(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ASSAY_EMBED_MODEL", "env-model")
    install(AssaySettings(data_dir=tmp_path, semantic={"search_ef": 32, "model": "given-model"}))
    assert current().data_dir == tmp_path and current().semantic.search_ef == 32
    assert current().semantic.model == "given-model"  # given over the environment it was installed in
    monkeypatch.setenv("ASSAY_SEARCH_EF", "256")  # set since: the environment decides
    assert current().semantic.search_ef == 256 and current().semantic.model == "given-model"
    monkeypatch.setenv("ASSAY_EMBED_MODEL", "other-model")  # changed since
    assert current().semantic.model == "other-model" and current().data_dir == tmp_path
    monkeypatch.delenv("ASSAY_EMBED_MODEL")  # unset since: the environment (nothing) decides, the default
    assert current().semantic.model == core.DEFAULT_MODEL


def test_environment_of_gives_back_the_settings() -> None:
    settings = AssaySettings(roots=["/a", "/b"], allowed_hosts=["x.lan"], documents={"ocr": False, "timeout": 2.5},
                             semantic={"model_cache": "/tmp/m"})
    again = AssaySettings.load(env=core.environment_of(settings))
    assert again.given() == settings.given()


def test_the_semantic_defaults_are_the_capabilitys() -> None:
    from flows.semantic.model import BACKENDS, DEFAULT_MODEL

    assert (core.DEFAULT_MODEL, core.BACKENDS) == (DEFAULT_MODEL, BACKENDS)


def test_every_setting_has_a_description_and_every_variable_one_setting() -> None:
    from flows.env import leaves

    assert all(field.description for _, field in leaves(AssaySettings))
    names = [env.name for _, field in leaves(AssaySettings) for env in field.metadata if isinstance(env, core.Env)]
    assert len(names) == len(set(names)) == len(core.ENVIRONMENT)
