"""Settings: command line > environment > YAML file > defaults, and errors that name the bad key or value."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_server.config import ConfigError, Settings, load_settings


@pytest.fixture
def dirs(tmp_path: Path) -> dict[str, str]:
    made = {}
    for name in ("yaml_root", "env_root", "cli_root", "other_root", "yaml_data", "env_data", "cli_data"):
        (tmp_path / name).mkdir()
        made[name] = str(tmp_path / name)
    return made


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "assay.yaml"
    path.write_text(text)
    return path


def test_defaults(tmp_path):
    s = load_settings(env={})
    assert (s.transport, s.host, s.port, s.cors_origins, s.cors_credentials) == ("stdio", "127.0.0.1", 3000, [], True)
    assert s.allowed_hosts == []  # loopback names only (mcp_server.http)
    assert s.data_dir == Path("~/.assay").expanduser().resolve()
    assert s.db_url == f"sqlite:///{s.data_dir / 'assay.db'}"
    assert s.roots == [] and s.effective_roots == [str(Path.home())]


def test_yaml_reference_example_is_read(tmp_path):
    cfg = write(tmp_path, 'server:\n  port: 3000\n  host: "0.0.0.0"\n  cors_origins:\n'
                          '    - "http://localhost:5173"\n    - "https://app.example.com"\n')
    s = load_settings(config_file=cfg, env={})
    assert s.port == 3000 and s.host == "0.0.0.0"
    assert s.cors_origins == ["http://localhost:5173", "https://app.example.com"]


def test_each_layer_overrides_the_one_below(tmp_path, dirs):
    cfg = write(tmp_path, f"server: {{transport: http, host: 10.0.0.1, port: 4000, cors_origins: [http://yaml]}}\n"
                          f"data_dir: {dirs['yaml_data']}\nroots: [{dirs['yaml_root']}]\n"
                          "database: {url: 'sqlite:///yaml.db'}\n")
    yaml_only = load_settings(config_file=cfg, env={})
    assert (yaml_only.transport, yaml_only.host, yaml_only.port) == ("http", "10.0.0.1", 4000)
    assert yaml_only.roots == [dirs["yaml_root"]] and yaml_only.cors_origins == ["http://yaml"]
    assert yaml_only.data_dir == Path(dirs["yaml_data"]) and yaml_only.db_url == "sqlite:///yaml.db"

    env = {"ASSAY_DATA_DIR": dirs["env_data"], "ASSAY_ROOTS": dirs["env_root"], "CORS_ORIGINS": "http://env",
           "ASSAY_DATABASE_URL": "sqlite:///env.db"}
    with_env = load_settings(config_file=cfg, env=env)
    assert with_env.data_dir == Path(dirs["env_data"]) and with_env.roots == [dirs["env_root"]]
    assert with_env.cors_origins == ["http://env"] and with_env.db_url == "sqlite:///env.db"
    assert with_env.port == 4000  # no environment variable for it: the YAML value stays

    cli = {"data_dir": dirs["cli_data"], "roots": [dirs["cli_root"]], "port": 5000, "host": "127.0.0.1",
           "transport": "stdio", "database_url": "sqlite:///cli.db"}
    with_cli = load_settings(cli, config_file=cfg, env=env)
    assert with_cli.data_dir == Path(dirs["cli_data"]) and with_cli.roots == [dirs["cli_root"]]
    assert (with_cli.port, with_cli.host, with_cli.transport) == (5000, "127.0.0.1", "stdio")
    assert with_cli.db_url == "sqlite:///cli.db" and with_cli.cors_origins == ["http://env"]


def test_unset_cli_options_do_not_override(tmp_path, dirs):
    s = load_settings({"roots": None, "port": None, "data_dir": None}, env={"ASSAY_ROOTS": dirs["env_root"]})
    assert s.roots == [dirs["env_root"]] and s.port == 3000


def test_assay_roots_splits_on_the_path_separator(dirs):
    env = {"ASSAY_ROOTS": os.pathsep.join([dirs["env_root"], " ", dirs["other_root"]])}
    assert load_settings(env=env).roots == [dirs["env_root"], dirs["other_root"]]


def test_cors_origins_split_on_commas_and_trimmed():
    env = {"CORS_ORIGINS": "http://localhost:5173, https://app.example.com ,"}
    assert load_settings(env=env).cors_origins == ["http://localhost:5173", "https://app.example.com"]


@pytest.mark.parametrize("text, key", [("server:\n  prot: 3000\n", "server.prot"),
                                       ("serverr:\n  port: 3000\n", "serverr"),
                                       ("database: {uri: x}\n", "database.uri")])
def test_unknown_yaml_key_is_named_with_the_known_keys(tmp_path, text, key):
    with pytest.raises(ConfigError) as err:
        load_settings(config_file=write(tmp_path, text), env={})
    message = str(err.value)
    assert key in message
    for known in ("server.port", "server.host", "server.cors_origins", "data_dir", "roots"):
        assert known in message


@pytest.mark.parametrize("text, expected", [("server: {port: 70000}\n", "server.port"),
                                            ("server: {port: web}\n", "server.port"),
                                            ("server: {transport: grpc}\n", "server.transport")])
def test_bad_yaml_values_name_their_key(tmp_path, text, expected):
    with pytest.raises(ConfigError, match=expected):
        load_settings(config_file=write(tmp_path, text), env={})


@pytest.mark.parametrize("port", [0, 65536, -1])
def test_bad_cli_port_is_refused(port):
    with pytest.raises(ConfigError, match="port"):
        load_settings({"port": port}, env={})


def test_missing_root_is_an_error_naming_it(tmp_path, dirs):
    ghost = str(tmp_path / "no-such-dir")
    with pytest.raises(ConfigError, match="no-such-dir.* not existing directories"):
        load_settings(env={"ASSAY_ROOTS": os.pathsep.join([dirs["env_root"], ghost])})
    with pytest.raises(ConfigError, match="no-such-dir"):
        load_settings({"roots": [ghost]}, env={})


@pytest.mark.parametrize("text, message", [("server: [\n", "not valid YAML"), ("- a\n- b\n", "must hold a mapping")])
def test_malformed_yaml_is_explained(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_settings(config_file=write(tmp_path, text), env={})


def test_missing_config_file_is_explained(tmp_path):
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_settings(config_file=tmp_path / "absent.yaml", env={})


def test_unknown_tool_group_lists_the_known_ones():
    with pytest.raises(ConfigError, match="unknown tool group.*known: indexing, navigation"):
        load_settings(env={"ASSAY_TOOL_GROUPS": "indexing,teleport"})


def test_settings_model_is_the_default_source():
    assert Settings().port == load_settings(env={}).port == 3000


def test_allowed_hosts_from_each_layer(tmp_path):
    cfg = write(tmp_path, "server: {allowed_hosts: [yaml.lan]}\n")
    assert load_settings(config_file=cfg, env={}).allowed_hosts == ["yaml.lan"]
    env = {"ASSAY_ALLOWED_HOSTS": "env.lan, 10.0.0.5 ,"}
    assert load_settings(config_file=cfg, env=env).allowed_hosts == ["env.lan", "10.0.0.5"]
    assert load_settings({"allowed_hosts": ["cli.lan"]}, config_file=cfg, env=env).allowed_hosts == ["cli.lan"]


def test_statement_timeout_from_yaml_and_env_reaches_the_store(tmp_path, monkeypatch):
    from mcp_server.config import prepare_environment
    from store.engine import statement_timeout_from_env

    config = tmp_path / "assay.yaml"
    config.write_text("database: {statement_timeout: 5}\n")
    assert load_settings(config_file=config, env={}).statement_timeout == 5
    assert load_settings(config_file=config, env={"ASSAY_STATEMENT_TIMEOUT": "0"}).statement_timeout == 0
    with pytest.raises(ConfigError, match="statement_timeout"):
        load_settings(env={"ASSAY_STATEMENT_TIMEOUT": "-1"})
    monkeypatch.setenv("ASSAY_STATEMENT_TIMEOUT", "")  # restored after the test, whatever prepare_environment sets
    monkeypatch.setattr("flows.core.prefect.configure", lambda data_dir: None)  # not this test's business
    settings = load_settings(config_file=config, env={"ASSAY_DATA_DIR": str(tmp_path / "data")})
    prepare_environment(settings)
    assert statement_timeout_from_env() == 5


def test_the_statement_time_limit_setting_is_given_to_the_engine_a_server_makes(tmp_path):
    from sqlalchemy import text

    from store.engine import get_engine
    from store.errors import QueryTimeout

    config = tmp_path / "assay.yaml"
    config.write_text("database: {statement_timeout: 0.3}\n")
    settings = load_settings(config_file=config, env={"ASSAY_DATA_DIR": str(tmp_path / "data")})
    engine = get_engine(settings.db_url, statement_timeout=settings.database.statement_timeout)
    endless = ("WITH RECURSIVE r(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM r WHERE x < 1000000000) "
               "SELECT count(*) FROM r")
    try:
        with engine.connect() as conn, pytest.raises(QueryTimeout, match="0.3 s"):
            conn.execute(text(endless)).scalar()
    finally:
        engine.dispose()
