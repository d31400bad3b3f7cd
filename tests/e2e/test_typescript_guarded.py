"""The guarded server (issue 23) through the official TypeScript MCP SDK client with an Authorization header, set up
and started as a user would: `assay users add`, `assay tokens create` (the token captured from stdout), then
`assay serve --transport http --auth` in its own process, with a low read limit so a session meets it.

One server and one node run (tests/e2e/ts/client.mjs) for the module: a session without a token and one with a wrong
token (both refused 401 before the MCP handshake), a viewer (reading tools only; a hidden tool refused as an unknown
one, -32002; reads beyond the limit refused with -32003 and the retry-after) and an editor (indexes the tree; the file
operations hidden). The server is then stopped with SIGTERM, and its audit database is read with sqlite3 to find the
refused authentications and the calls of both users.
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from mcp_server.guard.placement import TOOL_PERMISSIONS
from tests.conftest import make_tree
from tests.e2e.conftest import REPO, _stop, free_port, serve_args, server_env, wait_listening

pytestmark = pytest.mark.e2e

# as tests/e2e/test_typescript_client.py has them (not imported: that module pulls in the media generators)
TS_DIR = REPO / "tests" / "e2e" / "ts"
SDK_PACKAGE = TS_DIR / "node_modules" / "@modelcontextprotocol" / "sdk" / "package.json"
INITIALIZE_VERSIONS = {"2025-11-25", "2025-06-18"}

READ_LIMIT = 8  # ASSAY_RATE_READ: read calls per user per minute
EXTRA_READS = 3  # reads the viewer makes beyond the limit
USERS = {"vera": "viewer", "ed": "editor"}
WRONG_TOKEN = "assay_not-a-real-token-at-all"
NOT_FOUND, RATE_LIMITED = -32002, -32003
READING = {tool for tool, permission in TOOL_PERMISSIONS.items() if permission == "read"}


def assay(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`assay ARGS` as a script would run it; fails the module with its stderr when it does not exit 0."""
    done = subprocess.run([sys.executable, "-m", "mcp_server.cli", *args], env=env, cwd=REPO, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, f"assay {' '.join(args)} exited {done.returncode}:\n{done.stderr}"
    return done


def call(step_id: str, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"kind": "call", "id": step_id, "tool": tool, "args": args}


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def plan(url: str, tree: Path, tokens: dict[str, str]) -> dict[str, Any]:
    # refused before they count; then reads ("counted ..."), READ_LIMIT of them accepted, EXTRA_READS not
    viewer = [call("hidden index", "index", {"root": str(tree), "async": False}),
              call("unknown tool", "no-such-tool", {"root": str(tree), "async": False}),
              call("physical resolve", "resolve", {"address": "doc://ghost#pages=1", "virtual": False}),
              {"kind": "read", "id": "hidden resource", "uri": "logs://recent"},
              {"kind": "read", "id": "counted nodes", "uri": "synthesis://nodes?limit=2"}]
    viewer += [call(f"counted {i}", "session-info", {}) for i in range(READ_LIMIT + EXTRA_READS - 1)]
    editor = [{**call("index", "index", {"root": str(tree), "async": False}), "save": "indexed"},
              {"kind": "read", "id": "its job", "uri": "synthesis://jobs/{{indexed.jobId}}"},
              call("hidden delete-files", "delete-files", {"paths": [str(tree / "docs")]})]
    # the listed resources are not read (the client reads every one by default): only the steps' reads count
    return {"sessions": [
        {"label": "no token", "transport": "http", "url": url, "expectConnectError": True, "steps": []},
        {"label": "wrong token", "transport": "http", "url": url, "headers": bearer(WRONG_TOKEN),
         "expectConnectError": True, "steps": []},
        {"label": "viewer", "transport": "http", "url": url, "headers": bearer(tokens["vera"]), "readListed": False,
         "steps": viewer},
        {"label": "editor", "transport": "http", "url": url, "headers": bearer(tokens["ed"]), "readListed": False,
         "steps": editor},
    ]}


def audit_rows(data_dir: Path) -> list[dict[str, Any]]:
    """Every row of the server's audit database (audit.db beside the store), in the order written."""
    found = sorted(data_dir.rglob("audit.db"))
    assert len(found) == 1, f"one audit.db expected under {data_dir}: {found}"
    with sqlite3.connect(f"file:{found[0]}?mode=ro", uri=True) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM audit_events ORDER BY id")]


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> dict[str, Any]:
    if shutil.which("node") is None or not SDK_PACKAGE.exists():
        pytest.fail("Node.js and tests/e2e/ts/node_modules are needed: run ./scripts/setup")
    base = tmp_path_factory.mktemp("ts-guarded")
    tree = make_tree(base / "home" / "user")
    env = {**server_env(base, prefect=False), "ASSAY_RATE_READ": str(READ_LIMIT)}
    printed: dict[str, str] = {}
    for name, role in USERS.items():
        assay(env, "users", "add", name, "--role", role)
        printed[name] = assay(env, "tokens", "create", name).stdout
    tokens = {name: out.strip() for name, out in printed.items()}
    port, log = free_port(), base / "serve.log"
    with open(log, "wb") as out:
        server = subprocess.Popen(serve_args(tree, prefect=False,
                                             extra=["--transport", "http", "--port", str(port), "--auth"]),
                                  stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO, start_new_session=True)
    try:
        wait_listening(server, port, log)
        plan_path, report_path = base / "plan.json", base / "report.json"
        plan_path.write_text(json.dumps(plan(f"http://127.0.0.1:{port}/mcp", tree, tokens)))
        node = subprocess.run(["node", str(TS_DIR / "client.mjs"), str(plan_path), str(report_path)], cwd=TS_DIR,
                              capture_output=True, text=True, timeout=300)
        assert node.returncode == 0, f"node failed:\n{node.stdout}\n{node.stderr[-4000:]}"
    finally:
        _stop(server)  # SIGTERM to its process group; SIGKILL only if it does not end in 10 s
    report = json.loads(report_path.read_text())
    sessions = {s["label"]: s for s in report["sessions"]}
    for label, session in sessions.items():
        assert "fatal" not in session, f"{label}: {session['fatal']}\n{log.read_text()[-3000:]}"
    return {"sessions": sessions, "tree": tree, "tokens": tokens, "printed": printed, "exit": server.returncode,
            "log": log.read_text(), "audit": audit_rows(base / "data")}


def steps(session: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [s for s in session["steps"] if s["id"].startswith(prefix)]


def step(session: dict[str, Any], step_id: str) -> dict[str, Any]:
    return next(s for s in session["steps"] if s["id"] == step_id)


def test_tokens_create_prints_only_the_token(run):
    for name, out in run["printed"].items():
        assert re.fullmatch(r"assay_[\w-]{20,}\n", out), (name, out)


@pytest.mark.parametrize("label", ["no token", "wrong token"])
def test_a_client_without_a_good_token_cannot_connect_and_gets_401(run, label):
    session = run["sessions"][label]
    error = session["connectError"]
    assert error is not None, f"{label} connected"
    assert error["status"] == 401 and "invalid_token" in error["message"], error  # the SDK's 401 body
    assert "tools" not in session and session["steps"] == []


def test_the_viewer_connects_and_lists_only_reading_tools(run):
    viewer, editor = run["sessions"]["viewer"], run["sessions"]["editor"]
    assert viewer["protocolVersion"] in INITIALIZE_VERSIONS
    listed = {t["name"] for t in viewer["tools"]}
    assert {"navigate", "inspect", "session-info", "search"} <= listed
    assert listed <= READING, sorted(listed - READING)
    # every reading tool the server has (the editor sees them all) and nothing else
    assert listed == {t["name"] for t in editor["tools"]} & READING
    assert all(uri.startswith("synthesis://") for uri in viewer["resources"] + viewer["resourceTemplates"])


def test_a_hidden_tool_is_refused_to_the_viewer_exactly_as_an_unknown_one(run):
    viewer = run["sessions"]["viewer"]
    hidden, unknown = step(viewer, "hidden index")["protocolError"], step(viewer, "unknown tool")["protocolError"]
    assert hidden["code"] == unknown["code"] == NOT_FOUND
    assert hidden["message"].replace("'index'", "X") == unknown["message"].replace("'no-such-tool'", "X")
    assert hidden["data"] == unknown["data"]  # nothing that tells them apart
    assert step(viewer, "hidden resource")["protocolError"]["code"] == NOT_FOUND  # an operator resource


def test_a_visible_tool_whose_arguments_need_another_permission_is_refused_with_what_is_missing(run):
    error = step(run["sessions"]["viewer"], "physical resolve")["protocolError"]
    assert error["code"] == NOT_FOUND and error["data"] == {"missing": ["run"]}, error
    assert "vera does not have" in error["message"]


def test_reads_beyond_the_limit_are_refused_with_the_retry_after(run):
    viewer = run["sessions"]["viewer"]
    reads = steps(viewer, "counted ")  # a resource read, then session-info calls: one category, one limit
    assert len(reads) == READ_LIMIT + EXTRA_READS
    accepted, refused = reads[:READ_LIMIT], reads[READ_LIMIT:]
    assert [(s["id"], s["protocolError"]) for s in accepted if "protocolError" in s] == []
    assert json.loads(accepted[0]["contents"][0]["text"])
    assert all(s.get("isError") is False for s in accepted if s["kind"] == "call")
    for s in refused:
        error = s["protocolError"]
        assert error["code"] == RATE_LIMITED, (s["id"], error)
        assert error["data"]["category"] == "read" and error["data"]["limit"] == READ_LIMIT, error
        assert 0 < error["data"]["retryAfter"] <= 60, error
        assert "retry after" in error["message"]


def test_the_editor_indexes_the_tree_and_does_not_see_the_file_operations(run):
    editor = run["sessions"]["editor"]
    listed = {t["name"] for t in editor["tools"]}
    assert {"index", "plan-create", "plan-execute"} <= listed
    assert {TOOL_PERMISSIONS[t] for t in listed} == {"read", "change", "run"}
    assert not listed & {"delete-files", "move-files", "rename-files", "query_sql"}
    indexed = step(editor, "index")
    assert indexed.get("isError") is False, indexed.get("content") or indexed.get("protocolError")
    assert indexed["structuredContent"]["status"] == "completed"
    assert indexed["structuredContent"]["files"] == 10
    job = json.loads(step(editor, "its job")["contents"][0]["text"])
    assert job["status"] == "completed" and job["root"] == str(run["tree"])
    assert step(editor, "hidden delete-files")["protocolError"]["code"] == NOT_FOUND
    assert (run["tree"] / "docs").is_dir()


def test_the_server_stops_cleanly_on_sigterm(run):
    assert run["exit"] == 0, run["log"][-3000:]


def test_the_audit_log_holds_the_refused_authentications_and_both_users_calls(run):
    rows = run["audit"]
    refused = {r["name"] for r in rows if r["kind"] == "auth" and r["outcome"] == "unauthenticated"}
    assert {"no bearer token", "unknown, revoked or expired API token"} <= refused, refused
    calls = {(r["user"], r["name"], r["outcome"]) for r in rows if r["kind"] == "tool"}
    assert {("vera", "index", "denied"), ("vera", "no-such-tool", "denied"), ("vera", "resolve", "denied"),
            ("vera", "session-info", "ok"),
            ("vera", "session-info", "rate_limited"), ("ed", "index", "ok"),
            ("ed", "delete-files", "denied")} <= calls, calls
    reads = {(r["user"], r["name"].split("?")[0], r["outcome"]) for r in rows if r["kind"] == "resource"}
    assert {("vera", "logs://recent", "denied"), ("vera", "synthesis://nodes", "ok")} <= reads, reads
    limited = [r for r in rows if r["outcome"] == "rate_limited"]
    assert limited and {r["error_code"] for r in limited} == {str(RATE_LIMITED)}
    assert all(r["user"] == "vera" for r in limited)
    tools = [r for r in rows if r["kind"] == "tool"]
    assert all(r["client"] == "assay-e2e-typescript/1.0.0" and r["session"] for r in tools), tools[:3]
    everything = json.dumps(rows)
    assert not any(token in everything for token in [*run["tokens"].values(), WRONG_TOKEN])
