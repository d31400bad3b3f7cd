"""README's settings table is the settings model's (flows.core.settings): one row per setting, in the model's order,
and every way a row says a setting can be given (YAML key, environment variable, flag) reaches that setting."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from flows.core.settings import FLAT, AssaySettings
from flows.env import leaves, lookup, put
from mcp_server import docs
from mcp_server.cli.parser import build_parser
from mcp_server.config import load_settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
ROWS = docs.setting_rows()

# A value other than the default for every setting: (as YAML / as the command line gives it, as its variable spells
# it). "{tmp}" is a directory that exists. A setting added to the model without a sample fails below.
SAMPLES: dict[str, tuple[object, str]] = {
    "data_dir": ("{tmp}", "{tmp}"),
    "roots": (["{tmp}"], "{tmp}"),
    "server.transport": ("http", ""),
    "server.host": ("0.0.0.0", ""),
    "server.port": (4000, ""),
    "server.cors_origins": (["http://a.example"], "http://a.example"),
    "server.cors_credentials": (False, ""),
    "server.allowed_hosts": (["assay.lan"], "assay.lan"),
    "server.public_url": ("https://assay.example", "https://assay.example"),
    "server.auth": (True, "on"),
    "server.allow_unauthenticated": (True, "on"),
    "database.url": ("sqlite:////tmp/x.db", "sqlite:////tmp/x.db"),
    "database.statement_timeout": (5, "5"),
    "plans.dir": ("{tmp}", "{tmp}"),
    "tools.groups": (["indexing"], "indexing"),
    "prefect.enabled": (False, ""),
    "prefect.ui": (False, "off"),
    "prefect.port": (0, "0"),
    "documents.max_bytes": (1000, "1000"),
    "documents.timeout": (5, "5"),
    "documents.ocr": (False, "off"),
    "documents.ocr_language": ("deu", "deu"),
    "documents.max_read_chars": (500, "500"),
    "documents.search_timeout": (3, "3"),
    "documents.allow_symlinks": (True, "on"),
    "documents.builtin_plan": (False, "off"),
    "documents.pool": ("thread", "thread"),
    "documents.workers": (2, "2"),
    "semantic.model": ("/models/other", "/models/other"),
    "semantic.backend": ("torch", "torch"),
    "semantic.batch_size": (8, "8"),
    "semantic.device": ("cuda", "cuda"),
    "semantic.search_ef": (64, "64"),
    "semantic.threads": (1, "1"),
    "semantic.model_cache": ("{tmp}", "{tmp}"),
    "classify.pool": ("thread", "thread"),
    "classify.workers": (2, "2"),
    "index.writer": ("thread", "thread"),
    "trash.retention_days": (7.0, "7"),
    "cluster.work_pool": ("pool-a", "pool-a"),
    "cluster.cache_dir": ("{tmp}", "{tmp}"),
    "cluster.worker_name": ("node-1", "node-1"),
    "cluster.batch_entries": (50, "50"),
    "cluster.min_batch_entries": (5, "5"),
    "cluster.lease_seconds": (10, "10"),
    "guard.local_permissions": (["mcp_access", "read"], "mcp_access,read"),
    "guard.jwt_issuer": ("https://idp.example", "https://idp.example"),
    "guard.jwt_audience": (["assay"], "assay"),
    "guard.jwt_jwks_url": ("https://idp.example/jwks", "https://idp.example/jwks"),
    "guard.jwt_user_claim": ("sub", ""),
    "guard.jwt_roles_claim": ("groups", ""),
    "guard.jwt_role_map": ({"staff": "editor"}, ""),
    "guard.jwt_scope_prefix": ("mcp:", ""),
    "guard.jwt_default_role": ("viewer", ""),
    "guard.rate_read": (5, "5"),
    "guard.rate_write": (5, "5"),
    "guard.rate_sql": (5, "5"),
    "guard.audit": (False, "off"),
    "guard.audit_url": ("sqlite:////tmp/audit.db", "sqlite:////tmp/audit.db"),
    "guard.audit_retention_days": (7, "7"),
    "guard.sql_timeout": (3, "3"),
}


def _filled(value, tmp: Path):
    if isinstance(value, list):
        return [_filled(v, tmp) for v in value]
    return value.replace("{tmp}", str(tmp)) if isinstance(value, str) else value


def _default(setting: str):
    return lookup(AssaySettings().model_dump(), tuple(setting.split(".")))[1]


def test_the_readme_table_is_generated_from_the_model():
    assert docs.extract_section(README, "settings") == docs.settings_table(), (
        "README.md's settings table is stale: run `.venv/bin/python -m mcp_server.docs --write README.md`")


def test_every_setting_of_the_model_is_a_row_with_its_description():
    assert [row[0] for row in ROWS] == [".".join(key) for key, _ in leaves(AssaySettings)]
    assert all(row[4] for row in ROWS)
    assert sorted(SAMPLES) == sorted(row[0] for row in ROWS), "give each new setting a sample above"


@pytest.mark.parametrize("setting, flag, variable", [row[:3] for row in ROWS], ids=[row[0] for row in ROWS])
def test_each_way_the_table_names_reaches_its_setting(setting, flag, variable, tmp_path):
    key = tuple(setting.split("."))
    value, text = (_filled(v, tmp_path) for v in SAMPLES[setting])
    tree: dict = {}
    put(tree, key, value)
    config = tmp_path / "assay.yaml"
    config.write_text(yaml.safe_dump(tree))
    from_file = lookup(load_settings(config_file=config, env={}).model_dump(), key)[1]
    assert from_file != _default(setting), f"{setting} is not read from the config file"
    if variable:
        from_env = lookup(load_settings(env={variable: text}).model_dump(), key)[1]
        assert from_env == from_file, f"{variable} does not set {setting}"
    else:
        assert text == "", f"{setting} has no variable; its sample should not give one"
    if flag:
        name = next((flat for flat, place in FLAT.items() if place == key), key[-1])
        words = [flag] if isinstance(value, bool) else [flag, ",".join(map(str, value)) if isinstance(value, list)
                                                               else str(value)]
        args = vars(build_parser("serve").parse_args(["serve", *words]))
        dest = "no_prefect" if name == "use_prefect" else name
        assert args.get(dest) not in (None, False, []), f"{flag} does not set {dest} ({setting})"
