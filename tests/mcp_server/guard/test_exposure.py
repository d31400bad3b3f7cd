"""A server reachable from a network must know its callers: a non-loopback HTTP binding without auth is refused
unless the operator says so explicitly; loopback without auth stays the embedded default."""

from __future__ import annotations

import pytest

from flows.env import ConfigError
from mcp_server.config import load_settings
from mcp_server.guard.setup import check_exposure


def settings(tmp_path, **values):
    return load_settings({"data_dir": str(tmp_path), "roots": [str(tmp_path)], "transport": "http", **values})


def test_a_non_loopback_binding_without_auth_is_refused_naming_the_ways_out(tmp_path):
    with pytest.raises(ConfigError) as refused:
        check_exposure(settings(tmp_path, host="0.0.0.0", allowed_hosts=["assay.lan"]))
    assert "--auth" in refused.value.message and "--allow-unauthenticated" in refused.value.message


@pytest.mark.parametrize("values", [
    {"host": "127.0.0.1"}, {"host": "::1"}, {"host": "localhost"},
    {"host": "0.0.0.0", "auth": True}, {"host": "0.0.0.0", "allow_unauthenticated": True},
])
def test_loopback_auth_or_an_explicit_choice_is_served(tmp_path, values):
    check_exposure(settings(tmp_path, **values))


def test_server_auth_is_read_from_the_yaml_file_and_the_environment(tmp_path):
    config = tmp_path / "assay.yaml"
    config.write_text("server:\n  auth: true\nguard:\n  rate_read: 7\n")
    from_file = load_settings({"data_dir": str(tmp_path), "roots": [str(tmp_path)]}, config_file=config)
    assert from_file.server.auth is True and from_file.guard.rate_read == 7
    from_env = load_settings({"data_dir": str(tmp_path), "roots": [str(tmp_path)]}, env={"ASSAY_AUTH": "on"})
    assert from_env.server.auth is True
