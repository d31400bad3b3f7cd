"""The soak's load: clients that each make a fixed cycle of MCP calls over Streamable HTTP until the time is up, and
the dropper that adds and deletes files in the watched folder all along.

A client is an asyncio task with a session of its own (the MCP Python SDK's Client, ``mode="legacy"``: initialize,
then one POST per call on the session, as desktop clients call); every ``per_session`` calls it closes the session
and opens another, as clients come and go over a long day. Its cycle (``MIX``, started at an offset of its own):
reads (navigate, inspect, resource-search, resource-set-get, read_document, get_document_info, plan-list, the
synthesis://resource-sets resource), searches (search_documents' boolean text search and its semantic form, the
semantic ``search`` tool), a run of its own plan (a classifier outcome on its picture, extract_text on its texts;
the client rewrites a text, and every other time its picture, just before, so each run has work), set changes (its
set's members added and removed; a set of its own made and deleted) and file moves (its files moved back and forth
between two folders). Everything a client changes is its own, so no two clients' calls conflict: a failure is the
server's.

A call fails when the SDK raises (a JSON-RPC error, the transport), the tool answers an error, or the answer says
something did not happen (a move or set change that reports errors or paths not found, a plan run that did not
succeed).
"""

from __future__ import annotations

import contextlib
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.types import CallToolResult

from bench.guard_load import cpu_seconds, http_client, session
from bench.soak_corpus import ClientFiles, Corpus, picture
from bench.soak_server import ProcStats, fd_kinds, proc_stats

RESOURCE = "synthesis://resource-sets"
DROP_SET = "soak-drop"

# one client's cycle of calls (20): 10 reads, 4 searches, 1 plan run, 3 set changes (members added or removed twice,
# a set of its own made or deleted once), 2 moves
MIX: tuple[str, ...] = (
    "navigate", "text-search", "inspect", "set-modify", "search", "navigate", "move", "resource-search",
    "read_document", "plan-execute", "navigate", "semantic-documents", "resource-set-get", "read-resource", "move",
    "set-modify", "search", "get_document_info", "plan-list", "temp-set")


def client_plan(files: ClientFiles) -> dict[str, Any]:
    """The client's plan: its work folder as the source; pictures classified (thumbnail, metadata, hash), texts and
    documents extracted."""
    return {"name": f"soak-{files.name}", "description": "a soak client's plan",
            "sources": [{"name": "work", "type": "filesystem.index", "config": {"path": str(files.work)}}],
            "rules": [{"name": "pictures", "when": "media_type = image",
                       "outcomes": [{"type": "classifier", "classifierOperation": "all", "maxWidth": 128,
                                     "maxHeight": 128}]},
                      {"name": "texts", "when": "media_type in [document, text]",
                       "outcomes": [{"type": "extract_text"}]}]}


def watch_plan(drop: Path, debounce_ms: int) -> dict[str, Any]:
    """The continuous plan on the dropped files: each text settled in the folder joins DROP_SET and is extracted."""
    return {"name": "soak-watch", "mode": "continuous", "description": "the soak's watched folder",
            "sources": [{"name": "drop", "type": "filesystem.watch",
                         "config": {"path": str(drop), "debounce_ms": debounce_ms}}],
            "rules": [{"name": "dropped", "when": "extension = .txt",
                       "outcomes": [{"type": "selection_set", "selectionSetName": DROP_SET},
                                    {"type": "extract_text"}]}]}


@dataclass
class Call:
    """One call: who made it, what, when (seconds from the load's start), how long, and whether it failed."""

    client: int
    seq: int
    tool: str
    at: float
    seconds: float
    ok: bool
    detail: str | None = None


@dataclass
class ClientState:
    """What one client has changed, so its next calls follow from it."""

    files: ClientFiles
    mix: tuple[str, ...] = MIX  # the client's cycle (bench/soak.py --only: a part of MIX, to tell what grows)
    where: dict[str, int] = field(default_factory=dict)  # mover name -> 0 (in a) or 1 (in b)
    set_adds: int = 0
    temp_set: str | None = None
    temp_sets: int = 0
    plan_runs: int = 0

    def __post_init__(self) -> None:
        self.where = {name: 0 for name in self.files.movers}

    @property
    def set_name(self) -> str:
        return f"soak-set-{self.files.name}"

    @property
    def plan_name(self) -> str:
        return f"soak-{self.files.name}"


Check = Callable[[dict[str, Any]], str | None]  # the answer -> why it is a failure, or None


def _no_errors(answer: dict[str, Any]) -> str | None:
    if answer.get("errorCount"):
        return "; ".join(str(r.get("error")) for r in answer.get("results", []) if r.get("status") == "error")
    return None


def _all_found(answer: dict[str, Any]) -> str | None:
    return f"paths not found: {answer['notFound']}" if answer.get("notFound") else None


def _succeeded(answer: dict[str, Any]) -> str | None:
    if answer.get("status") != "success":
        return f"execution {answer.get('execution_id')} ended {answer.get('status')}: {answer.get('error_message')}"
    return None


def _rewrite(state: ClientState) -> None:
    """New content for the client's text (and every other run, a new picture): work for its plan's outcomes."""
    state.plan_runs += 1
    work = state.files.work
    (work / "list.txt").write_text(f"run {state.plan_runs} of {state.plan_name}\n" * (1 + state.plan_runs % 7))
    if state.plan_runs % 2 == 0:
        picture(work / "pic.jpg", seed=1000 * state.files.index + state.plan_runs)


def next_call(state: ClientState, seq: int, corpus: Corpus) -> tuple[str, str, dict[str, Any], Check | None]:
    """The ``seq``-th call of a client: (label, tool or resource URI, arguments, the answer's check)."""
    c = state.files.index
    slot = state.mix[(seq + 3 * c) % len(state.mix)]
    n = seq + 7 * c
    own = [str(p) for p in state.files.files]
    if slot == "navigate":
        return slot, "navigate", {"path": corpus.folders[n % len(corpus.folders)], "limit": 100}, None
    if slot == "inspect":
        targets = corpus.documents + corpus.pictures
        return slot, "inspect", {"path": targets[n % len(targets)]}, None
    if slot == "text-search":
        return slot, "search_documents", {"query": corpus.words[n % len(corpus.words)], "scope": {"type": "global"},
                                          "max_results": 10}, None
    if slot == "semantic-documents":
        return slot, "search_documents", {"query": corpus.questions[n % len(corpus.questions)],
                                          "options": {"limit": 5}}, None
    if slot == "search":
        return slot, "search", {"query": corpus.questions[n % len(corpus.questions)],
                                "mode": ("hybrid", "semantic")[n % 2], "limit": 5}, None
    if slot == "resource-search":
        return slot, "resource-search", {"name": state.set_name, "limit": 20,
                                         "sort_by": ("size", "name", "mtime")[n % 3]}, None
    if slot == "resource-set-get":
        return slot, "resource-set-get", {"name": (state.set_name, DROP_SET)[n % 2], "include_entries": True,
                                          "limit": 50}, None
    if slot == "read_document":
        return slot, "read_document", {"path": corpus.documents[n % len(corpus.documents)], "pages": [1]}, None
    if slot == "get_document_info":
        return slot, "get_document_info", {"path": corpus.documents[n % len(corpus.documents)]}, None
    if slot == "read-resource":
        return slot, RESOURCE, {}, None
    if slot == "plan-list":
        return slot, "plan-list", {}, None
    if slot == "set-modify":
        state.set_adds += 1
        operation = "add" if state.set_adds % 2 else "remove"
        return slot, "resource-set-modify", {"name": state.set_name, "operation": operation,
                                             "paths": own[:2] + [corpus.documents[n % len(corpus.documents)]]}, (
            _all_found)
    if slot == "temp-set":
        if state.temp_set is None:
            state.temp_sets += 1
            state.temp_set = f"soak-tmp-{state.files.name}-{state.temp_sets}"
            return slot, "resource-set-create", {"name": state.temp_set, "description": "made and deleted"}, None
        name, state.temp_set = state.temp_set, None
        return slot, "resource-set-delete", {"name": name}, None
    if slot == "move":
        mover = state.files.movers[n % len(state.files.movers)]
        side = state.where[mover]
        source = state.files.moves[side] / mover
        return slot, "move-files", {"moves": [{"from": str(source), "to": str(state.files.moves[1 - side])}]}, (
            _no_errors)
    if slot == "plan-execute":
        _rewrite(state)
        return slot, "plan-execute", {"name": state.plan_name, "wait": True}, _succeeded
    raise AssertionError(f"unknown slot {slot}")


def answer_of(result: CallToolResult) -> dict[str, Any]:
    """A tool's answer as a dict: its structured content, else its text as JSON ({} when it is neither)."""
    if isinstance(result.structured_content, dict):
        return result.structured_content
    with contextlib.suppress(ValueError, IndexError, AttributeError):
        parsed = json.loads(result.content[0].text)  # type: ignore[union-attr]
        if isinstance(parsed, dict):
            return parsed
    return {}


def error_text(result: CallToolResult) -> str:
    return (result.content[0].text if result.content else "tool error")[:300]  # type: ignore[union-attr]


async def one_call(client: Client, state: ClientState, seq: int, corpus: Corpus, origin: float) -> Call:
    label, name, arguments, check = next_call(state, seq, corpus)
    tool = name if label != "read-resource" else "resource read"
    if label == "semantic-documents":
        tool = "search_documents (semantic)"
    started = time.monotonic()
    ok, detail = True, None
    try:
        if label == "read-resource":
            await client.read_resource(name)
        else:
            result = await client.call_tool(name, arguments)
            if result.is_error:
                ok, detail = False, error_text(result)
            elif check is not None and (why := check(answer_of(result))):
                ok, detail = False, why[:300]
    except Exception as exc:  # a JSON-RPC error or the transport's: counted and listed, the client goes on
        ok, detail = False, f"{type(exc).__name__}: {exc}"[:300]
    seconds = time.monotonic() - started
    if ok and label == "move":
        mover = Path(arguments["moves"][0]["from"]).name
        state.where[mover] = 1 - state.where[mover]
    return Call(state.files.index, seq, tool, started - origin, seconds, ok, detail)


async def run_client(url: str, state: ClientState, corpus: Corpus, *, origin: float, deadline: float,
                     per_session: int, pause: float, out: list[Call], min_calls: int = 0) -> int:
    """Calls until ``deadline`` (time.monotonic()) and at least ``min_calls`` calls (a loaded machine still makes
    every kind of call), a new session every ``per_session`` calls; returns the sessions opened. A session that
    fails to open or close is a failed call of its own ("session")."""
    seq = sessions = 0

    def more() -> bool:
        return time.monotonic() < deadline or seq < min_calls

    while more():
        started = time.monotonic()
        try:
            async with http_client(None) as http, session(url, http) as client:
                sessions += 1
                for _ in range(per_session):
                    if not more():
                        break
                    out.append(await one_call(client, state, seq, corpus, origin))
                    seq += 1
                    if pause:
                        await anyio.sleep(pause)
        except Exception as exc:  # the session's own failure (opening, closing): listed, and the client goes on
            out.append(Call(state.files.index, seq, "session", started - origin, time.monotonic() - started, False,
                            f"{type(exc).__name__}: {exc}"[:300]))
            seq += 1
            await anyio.sleep(1.0)
    return sessions


class Dropper:
    """A thread that adds a text file to the watched folder or deletes the oldest one, every ``every`` seconds, keeping
    between 1 and ``most`` files there; counts what it did."""

    def __init__(self, folder: Path, *, every: float, most: int = 20, seed: int = 25) -> None:
        self.folder, self.every, self.most = folder, every, most
        self.added = self.deleted = 0
        self._rng = random.Random(seed)
        self._present: list[Path] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="soak-dropper", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            grow = len(self._present) < 1 or (len(self._present) < self.most and self._rng.random() < 0.6)
            if grow:
                path = self.folder / f"d{self.added:06d}.txt"
                path.write_text(f"dropped file {self.added}: the telescope and the comet\n" * 20)
                self._present.append(path)
                self.added += 1
            else:
                self._present.pop(0).unlink()
                self.deleted += 1

    def __enter__(self) -> Dropper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def on_disk(self) -> list[str]:
        return sorted(str(p) for p in self.folder.iterdir() if p.suffix == ".txt")


@dataclass
class LoadResult:
    """The load's calls, the sessions opened, its wall time, the server's state after the warm-up and at the end, and
    the CPU seconds of this process (the clients and the dropper) and of the server with its children."""

    calls: list[Call]
    sessions: int
    wall: float
    start: ProcStats
    end: ProcStats
    client_cpu: float
    server_cpu: float
    origin: float  # time.monotonic() at the load's start
    fds: dict[str, dict[str, int]]  # "start" / "end": what the server's file descriptors are (soak_server.fd_kinds)


async def drive(url: str, states: list[ClientState], corpus: Corpus, *, pid: int, seconds: float, warm_up: float,
                per_session: int, pause: float, min_calls: int = 0) -> LoadResult:
    """Every client calls for ``seconds``; the server is looked at once the first ``warm_up`` seconds are over (its
    "start") and when the last client stops (its "end"). The CPU figures cover the time after the warm-up."""
    origin = time.monotonic()
    deadline = origin + seconds
    calls: list[Call] = []
    sessions: list[int] = []
    after_warm_up: dict[str, Any] = {}

    async def client(state: ClientState) -> None:
        sessions.append(await run_client(url, state, corpus, origin=origin, deadline=deadline,
                                         per_session=per_session, pause=pause, out=calls, min_calls=min_calls))

    async def look_after_warm_up() -> None:
        await anyio.sleep(warm_up)
        after_warm_up.update(stats=proc_stats(pid), cpu=time.process_time(), server_cpu=cpu_seconds(pid),
                             fds=fd_kinds(pid))

    async with anyio.create_task_group() as tg:
        tg.start_soon(look_after_warm_up)
        for state in states:
            tg.start_soon(client, state)
    end, end_fds = proc_stats(pid), fd_kinds(pid)
    return LoadResult(calls, sum(sessions), time.monotonic() - origin, after_warm_up["stats"], end,
                      time.process_time() - after_warm_up["cpu"], cpu_seconds(pid) - after_warm_up["server_cpu"],
                      origin, {"start": after_warm_up["fds"], "end": end_fds})
