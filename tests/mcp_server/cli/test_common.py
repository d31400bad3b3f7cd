"""What every command shares: its log lines on stderr say what assay did, without the libraries' INFO chatter."""

from __future__ import annotations

import logging

from mcp_server.cli.common import NOISY_LOGGERS, setup_logging
from tests.mcp_server.test_cli import assay


def test_a_command_logs_its_own_info_lines_and_none_of_alembics(tmp_path, tree):
    res = assay(tmp_path, "index", str(tree), "--no-prefect", ASSAY_ROOTS=str(tree))
    assert res.returncode == 0, res.stderr
    assert " INFO store.migrate: " in res.stderr  # INFO lines are on: the new store's revision is said
    assert "setup plugin" not in res.stderr and " alembic." not in res.stderr  # alembic imported while they were


def test_the_quiet_libraries_still_log_their_warnings():
    before = {name: logging.getLogger(name).level for name in NOISY_LOGGERS}
    try:
        setup_logging()
        plugins = logging.getLogger("alembic.runtime.plugins")
        assert not plugins.isEnabledFor(logging.INFO) and plugins.isEnabledFor(logging.WARNING)
    finally:
        for name, level in before.items():
            logging.getLogger(name).setLevel(level)
