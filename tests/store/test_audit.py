"""The audit log (store.audit): what is written, what is redacted, what survives a shutdown, a locked or missing
database and the retention; its table is never the store's."""

from __future__ import annotations

import logging
import os
import socket
import sqlite3
import threading
import time
from pathlib import Path

import pytest
from sqlalchemy import create_engine, func, inspect, select
from sqlmodel import SQLModel

from store import audit as audit_module
from store.audit import (MAX_ITEMS, MAX_STRING, REDACTED, AuditLog, AuditRecord, AuditUnavailable,
                         audit_events, default_audit_url, redact)
from store.engine import make_engine
from store.errors import InvalidInput
from tests.conftest import BACKENDS, wait_for

NOW = 1_750_000_000.0
DAY = 86_400.0


@pytest.fixture(params=BACKENDS)
def audit_url(request, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'audit.db'}"
    return request.getfixturevalue("pg_database")


@pytest.fixture
def opened():
    """Makes started audit logs and closes them after the test."""
    logs: list[AuditLog] = []

    def make(url: str, **kwargs) -> AuditLog:
        audit = AuditLog(url, **kwargs)
        audit.start()
        logs.append(audit)
        return audit

    yield make
    for audit in logs:
        audit.close(timeout=1.0)


def rows_in(url: str) -> int:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(audit_events)).scalar_one()
    finally:
        engine.dispose()


def rec(name: str = "list_sets", **fields) -> AuditRecord:
    return AuditRecord(**{"time": NOW, "kind": "tool", "name": name, "outcome": "ok", **fields})


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


# -- what is written ---------------------------------------------------------------------------------------------


def test_a_record_is_written_with_every_field(audit_url, opened):
    audit = opened(audit_url)
    audit.record(AuditRecord(time=NOW, kind="tool", name="query_sql", outcome="error", user="ana", session="s-1",
                             client="claude/1.2", arguments={"sql": "select 1", "limit": 5, "nested": [1, None, True]},
                             error_code="INVALID_PARAMS", duration_ms=12.5, result_bytes=2048))
    assert audit.flush(timeout=30)
    [row] = audit.recent()
    assert isinstance(row.pop("id"), int)
    assert row == {"time": NOW, "kind": "tool", "name": "query_sql", "outcome": "error", "user": "ana",
                   "session": "s-1", "client": "claude/1.2",
                   "arguments": {"sql": "select 1", "limit": 5, "nested": [1, None, True]},
                   "error_code": "INVALID_PARAMS", "duration_ms": 12.5, "result_bytes": 2048}
    assert audit.stats()["written"] == 1


def test_values_no_database_takes_are_made_safe_rather_than_holding_the_queue(audit_url, opened):
    audit = opened(audit_url)
    audit.record(rec(name="nul\x00name", user="bad-\udc80-bytes", arguments={"path": "/x/\udcff.txt"},
                     result_bytes=2**70, client="c" * (MAX_STRING + 5)))
    assert audit.flush(timeout=30)
    [row] = audit.recent()
    assert row["name"] == "nul\\x00name"
    assert row["user"] == "bad-\\udc80-bytes"
    assert row["arguments"] == {"path": "/x/\udcff.txt"}  # JSON escapes it, and gives it back
    assert row["result_bytes"] == 2**63 - 1
    assert row["client"].endswith("…(5 more characters)")


# -- redaction ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["password", "Passwd", "db_password", "secret", "client_secret", "token",
                                 "access_token", "X-Auth-Token", "api_key", "api-key", "APIKey", "Authorization",
                                 "credential", "credentials", "private_key", "privateKey", "Cookie"])
def test_a_key_naming_a_secret_has_its_value_redacted(key):
    assert redact({key: "hunter2", "path": "/home"}) == {key: REDACTED, "path": "/home"}


def test_secrets_are_redacted_at_any_depth():
    value = {"servers": [{"name": "db", "auth": {"password": "p", "user": "u"}}, "plain"],
             "headers": {"Authorization": {"scheme": "Bearer", "value": "abc"}}}
    assert redact(value) == {"servers": [{"name": "db", "auth": {"password": REDACTED, "user": "u"}}, "plain"],
                             "headers": {"Authorization": REDACTED}}
    assert value["servers"][0]["auth"]["password"] == "p"  # a copy: the caller's arguments are left alone


def test_long_strings_and_lists_are_cut_with_what_was_left_out():
    out = redact({"text": "x" * (MAX_STRING + 10), "items": list(range(MAX_ITEMS + 3))})
    assert out["text"] == "x" * MAX_STRING + "…(10 more characters)"
    assert out["items"] == [*range(MAX_ITEMS), "…(3 more items)"]


def test_deep_nesting_is_cut_and_odd_values_become_text():
    deep: list = []
    for _ in range(50):
        deep = [deep]
    out = redact({"deep": deep, "raw": b"\x00\x01", "set": {1}})
    level = out["deep"]
    depth = 1
    while isinstance(level, list):
        level, depth = level[0], depth + 1
    assert level.endswith("nested too deep)") and depth <= audit_module.MAX_DEPTH + 1
    assert out["raw"] == "…(2 bytes)" and out["set"] == "{1}"


def test_recorded_arguments_are_stored_redacted(audit_url, opened):
    audit = opened(audit_url)
    audit.record(rec(arguments={"batch": [{"source": {"token": "t0p", "url": "s3://b"}}]}))
    assert audit.flush(timeout=30)
    assert audit.recent()[0]["arguments"] == {"batch": [{"source": {"token": REDACTED, "url": "s3://b"}}]}


# -- nothing lost, nothing blocked -------------------------------------------------------------------------------


def test_nothing_is_lost_on_a_clean_shutdown(audit_url):
    audit = AuditLog(audit_url)
    audit.start()
    for i in range(20_000):
        audit.record(rec(name=f"t{i}", user=f"u{i % 7}", arguments={"i": i}))
    audit.close()
    assert rows_in(audit_url) == 20_000
    assert audit.stats()["dropped"] == 0 and audit.stats()["queued"] == 0


def test_close_is_idempotent_and_later_records_are_dropped_not_raised(tmp_path):
    audit = AuditLog(f"sqlite:///{tmp_path / 'audit.db'}")
    audit.start()
    audit.record(rec())
    audit.close()
    audit.close()
    audit.record(rec())
    stats = audit.stats()
    assert (stats["written"], stats["dropped"], stats["queued"]) == (1, 1, 0)


def test_a_full_queue_drops_the_oldest_records_and_counts_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    audit = AuditLog(url, max_queue=10)
    for i in range(15):  # not started: everything waits in the queue
        audit.record(rec(name=f"t{i}", time=NOW + i))
    assert (audit.stats()["queued"], audit.stats()["dropped"]) == (10, 5)
    audit.start()
    try:
        assert audit.flush(timeout=30)
        assert [r["name"] for r in audit.recent()] == [f"t{i}" for i in reversed(range(5, 15))]
    finally:
        audit.close()


def test_a_value_that_is_not_a_record_is_counted_not_raised(tmp_path, opened):
    audit = opened(f"sqlite:///{tmp_path / 'audit.db'}")
    audit.record(None)  # a caller's bug must not break its request
    assert audit.stats()["dropped"] == 1
    assert "could not be queued" in audit.errors()[0]["message"]


def test_record_does_not_block_while_another_connection_holds_the_database(tmp_path, opened):
    path = tmp_path / "audit.db"
    audit = opened(f"sqlite:///{path}", interval=0.01)
    locker = sqlite3.connect(path, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        recorder = threading.Thread(target=lambda: [audit.record(rec(name=f"t{i}")) for i in range(1_000)])
        recorder.start()
        recorder.join(60)  # bounds a hang only
        assert not recorder.is_alive()
        stats = audit.stats()
        assert (stats["queued"], stats["written"], stats["dropped"]) == (1_000, 0, 0)
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    assert audit.flush(timeout=60)
    assert rows_in(f"sqlite:///{path}") == 1_000


# -- an unavailable database -------------------------------------------------------------------------------------


def _missing_directory(base: Path) -> Path:
    return base / "missing"


def _file_in_the_way(base: Path) -> Path:
    (base / "occupied").write_text("not a directory")
    return base / "occupied"


def _read_only_directory(base: Path) -> Path:
    (base / "read-only").mkdir(mode=0o555)
    return base / "read-only"


@pytest.mark.parametrize("blocked", [
    _missing_directory, _file_in_the_way,
    pytest.param(_read_only_directory, marks=pytest.mark.skipif(
        hasattr(os, "geteuid") and os.geteuid() == 0, reason="root writes into read-only directories")),
])
def test_a_sqlite_database_that_cannot_be_opened_is_reported_and_gets_the_backlog_once_it_can(
        tmp_path, opened, caplog, blocked):
    directory = blocked(tmp_path)
    url = f"sqlite:///{directory / 'audit.db'}"
    with caplog.at_level(logging.ERROR, logger="store"):
        audit = opened(url, interval=0.01)  # raises nothing
        assert "unable to open database file" in audit.errors()[0]["message"]
        for i in range(25):
            audit.record(rec(name=f"t{i}"))
        wait_for(lambda: audit.stats()["failed_batches"] >= 2, timeout=60, what="two failed attempts")
    stats = audit.stats()
    assert stats["queued"] == 25 and stats["written"] == 0 and "unable to open" in stats["last_error"]
    retried = [r for r in caplog.records if "kept and retried" in r.getMessage()]
    assert len(retried) == 1  # once per failure streak, not per attempt

    if directory.is_file():
        directory.unlink()
    directory.mkdir(exist_ok=True)
    directory.chmod(0o755)
    assert audit.flush(timeout=60)
    assert rows_in(url) == 25
    assert audit.stats()["queued"] == 0


def test_an_unreachable_postgresql_is_reported_and_close_gives_up_after_its_timeout(opened):
    pytest.importorskip("psycopg")
    audit = opened(f"postgresql+psycopg://postgres:secret@127.0.0.1:{closed_port()}/assay", interval=0.01)
    assert "refused" in audit.errors()[0]["message"].lower()
    for i in range(5):
        audit.record(rec(name=f"t{i}"))
    wait_for(lambda: audit.stats()["failed_batches"] >= 1, timeout=60, what="a failed attempt")
    assert not audit.flush(timeout=0.1)
    with pytest.raises(AuditUnavailable):
        audit.recent()
    audit.close(timeout=0.5)
    stats = audit.stats()
    assert (stats["queued"], stats["written"], stats["dropped"]) == (0, 0, 5)
    assert "closing without writing 5" in audit.errors()[0]["message"]
    assert "secret" not in stats["url"] and "***" in stats["url"]


# -- retention ---------------------------------------------------------------------------------------------------


def test_rows_older_than_the_retention_are_pruned_and_newer_ones_kept(audit_url, opened):
    audit = opened(audit_url, retention_days=30)
    for age_days, name in [(100, "old"), (31, "just-old"), (29, "recent"), (0, "now")]:
        audit.record(rec(name=name, time=NOW - age_days * DAY))
    assert audit.flush(timeout=30)
    assert audit.prune(now=NOW) == 2
    assert [r["name"] for r in audit.recent()] == ["now", "recent"]


def test_a_retention_of_zero_keeps_everything(audit_url, opened):
    audit = opened(audit_url, retention_days=0)
    audit.record(rec(time=1.0))
    assert audit.flush(timeout=30)
    assert audit.prune(now=NOW) == 0
    assert len(audit.recent()) == 1


def test_starting_prunes_by_retention(tmp_path):
    url = f"sqlite:///{tmp_path / 'audit.db'}"
    first = AuditLog(url, retention_days=0)
    first.start()
    first.record(rec(name="ancient", time=time.time() - 400 * DAY))
    first.record(rec(name="fresh", time=time.time()))
    first.close()
    second = AuditLog(url, retention_days=90)
    second.start()
    try:
        wait_for(lambda: rows_in(url) == 1, what="the prune at start")
        assert [r["name"] for r in second.recent()] == ["fresh"]
    finally:
        second.close()


# -- reading -----------------------------------------------------------------------------------------------------


def test_recent_filters_and_orders_newest_first(audit_url, opened):
    audit = opened(audit_url)
    records = [
        rec(name="a", time=NOW + 1, user="ana", kind="tool", outcome="ok"),
        rec(name="b", time=NOW + 2, user="bo", kind="resource", outcome="denied"),
        rec(name="expired", time=NOW + 3, kind="auth", outcome="unauthenticated", client="10.0.0.9"),
        rec(name="c", time=NOW + 4, user="ana", kind="tool", outcome="rate_limited"),
        rec(name="d", time=NOW + 5, user="ana", kind="list", outcome="ok"),
    ]
    for r in records:
        audit.record(r)
    assert audit.flush(timeout=30)

    def names(**filters) -> list[str]:
        return [r["name"] for r in audit.recent(**filters)]

    assert names() == ["d", "c", "expired", "b", "a"]
    assert names(limit=2) == ["d", "c"]
    assert names(user="ana") == ["d", "c", "a"]
    assert names(kinds=["tool", "auth"]) == ["c", "expired", "a"]
    assert names(outcomes=["denied", "unauthenticated"]) == ["expired", "b"]
    assert names(since=NOW + 3) == ["d", "c", "expired"]
    assert names(user="ana", kinds=["tool"], outcomes=["ok"]) == ["a"]


@pytest.mark.parametrize("filters", [{"kinds": ["tools"]}, {"outcomes": ["failed"]}, {"limit": 0},
                                     {"limit": audit_module.MAX_RECENT + 1}])
def test_recent_refuses_what_it_cannot_filter_by(tmp_path, filters):
    audit = AuditLog(f"sqlite:///{tmp_path / 'audit.db'}")
    try:
        with pytest.raises(InvalidInput):
            audit.recent(**filters)
    finally:
        audit.close()


@pytest.mark.parametrize("fields", [{"kind": "call"}, {"outcome": "failed"}])
def test_a_record_of_an_unknown_kind_or_outcome_is_a_programming_error(fields):
    with pytest.raises(ValueError, match=f"{next(iter(fields))} .* is not one of"):
        rec(**fields)


# -- where it lives ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("store_url", "expected"), [
    ("sqlite:////srv/assay/assay.db", "sqlite:////srv/assay/audit.db"),
    ("sqlite:///relative/server.db", "sqlite:///relative/audit.db"),
    ("sqlite://", "sqlite:////data/audit.db"),
    ("sqlite:///:memory:", "sqlite:////data/audit.db"),
    ("postgresql+psycopg://u:p@db.example/assay", "sqlite:////data/audit.db"),
])
def test_the_default_audit_database_sits_beside_a_sqlite_store_or_in_the_data_dir(store_url, expected):
    assert default_audit_url(store_url, "/data") == expected


def test_the_store_never_gets_an_audit_table(tmp_path):
    assert "audit_events" not in SQLModel.metadata.tables
    assert set(audit_module.metadata.tables) == {"audit_events"}
    engine = make_engine(f"sqlite:///{tmp_path / 'assay.db'}")
    try:
        assert "audit_events" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()
