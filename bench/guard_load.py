"""bench/guard.py's load figures: many MCP clients of a few users against one guarded server, each making a fixed mix
of calls; what each call got back, and the checks on it: the rate limits exact per user and category (from the
clients' timestamps and from the audit log's), refusals only at the limit, and one audit record per call made; the
server process's CPU and memory, read from /proc.

The clients run as asyncio tasks in worker processes (``--client-procs``; spawned, so a worker's CPU is its own and is
measured), each with its own HTTP connection and MCP session (``mode="legacy"``: one POST per call on one session).
The workers connect every session first, wait at a barrier, then all start calling at once.
"""

from __future__ import annotations

import bisect
import contextlib
import json
import multiprocessing
import os
import threading
import time
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from sqlalchemy import create_engine, select

from mcp_server.guard import placement
from store.audit import audit_events

WINDOW = 60.0  # the rate limiter's window, seconds
HIDDEN = -32002  # a tool the caller may not see, answered as an unknown one
RATE_LIMITED = -32003
TOLERANCE = 0.01  # seconds of slack between the audit's wall-clock times and the limiter's monotonic clock
RESOURCE = "synthesis://resource-sets"  # the resource every client reads: the list of sets (small, any reader)
EDIT_SET = "bench-edit"  # the set editors add to and remove from

# the users of the load: (name, role); 2 viewers, 2 editors, 1 admin
USERS: tuple[tuple[str, str], ...] = (("viewer1", "viewer"), ("viewer2", "viewer"), ("editor1", "editor"),
                                      ("editor2", "editor"), ("admin1", "admin"))
WARM_USER = ("warmup", "admin")  # one call of each kind before the load, so first-call costs stay out of it

# each role's cycle of calls; a client starts it at an offset of its own
MIXES: dict[str, tuple[str, ...]] = {
    "viewer": ("navigate", "inspect", "resource-search", "session-info", "navigate", "plan-list", "read", "inspect",
               "resource-search", "forbidden"),
    "editor": ("navigate", "inspect", "resource-search", "session-info", "write", "plan-list", "read", "navigate",
               "write", "inspect"),
    "admin": ("navigate", "inspect", "resource-search", "list_users", "write", "plan-list", "read", "navigate",
              "write", "session-info"),
}
OUTCOME_IN_AUDIT = {"ok": "ok", "rate_limited": "rate_limited", "hidden": "denied", "tool_error": "error"}


@dataclass(frozen=True)
class Targets:
    """What the calls are about: folders to navigate, files to inspect, resource-search arguments."""

    dirs: list[str]
    files: list[str]
    searches: list[dict[str, Any]]


@dataclass(frozen=True)
class ClientSpec:
    user: str
    role: str
    token: str
    index: int  # the client's number among all clients
    calls: int


@dataclass
class Call:
    user: str
    client: int
    seq: int
    kind: str  # tool | resource
    name: str
    category: str | None  # the rate-limit category; None for a call the caller may not make
    sent: float  # epoch seconds
    received: float
    seconds: float
    outcome: str = "ok"  # ok | rate_limited | hidden | tool_error | failed
    detail: str | None = None


@dataclass
class _Writes:
    """An editor client's writes: queries it made and may delete, and whether its next set change adds."""

    created: list[str] = field(default_factory=list)
    count: int = 0


def next_call(spec: ClientSpec, seq: int, targets: Targets, writes: _Writes) -> tuple[str, str, dict[str, Any], bool]:
    """The ``seq``-th call of a client: (kind, name, arguments, whether the caller may not make it)."""
    mix = MIXES[spec.role]
    slot = mix[(seq + 3 * spec.index) % len(mix)]
    n = seq + 7 * spec.index
    if slot == "navigate":
        return "tool", "navigate", {"path": targets.dirs[n % len(targets.dirs)], "limit": 100}, False
    if slot == "inspect":
        return "tool", "inspect", {"path": targets.files[n % len(targets.files)]}, False
    if slot == "resource-search":
        return "tool", "resource-search", targets.searches[n % len(targets.searches)], False
    if slot == "read":
        return "resource", RESOURCE, {}, False
    if slot == "forbidden":  # a viewer may not change anything: the tool is hidden from it
        return "tool", "query-create", {"name": f"nope-{spec.user}-{seq}", "query": {"kind": "file"}}, True
    if slot == "write":
        writes.count += 1
        step = writes.count % 3
        if step == 0 and writes.created:
            return "tool", "query-delete", {"name": writes.created.pop(0)}, False
        if step == 1:
            name = f"q-{spec.user}-{spec.index}-{seq}"
            return "tool", "query-create", {"name": name, "query": {"kind": "file", "extension": ".jpg"}}, False
        operation = "add" if writes.count % 2 else "remove"
        return "tool", "resource-set-modify", {"name": EDIT_SET, "operation": operation,
                                               "paths": [targets.files[n % len(targets.files)]]}, False
    return "tool", slot, {}, False


def http_client(token: str | None) -> httpx2.AsyncClient:
    """The HTTP client of one MCP session: the bearer token, the SDK transport's timeouts."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0))


def session(url: str, http: httpx2.AsyncClient) -> Client:
    """An MCP session over Streamable HTTP in the 2025-11-25 mode (``legacy``: initialize, then one POST per call on
    the session), the way desktop clients call."""
    return Client(streamable_http_client(url, http_client=http), mode="legacy")


async def one_call(client: Client, spec: ClientSpec, seq: int, kind: str, name: str, arguments: dict[str, Any],
                   forbidden: bool) -> Call:
    category = None if forbidden else ("read" if kind == "resource" else placement.category(name))
    sent, started = time.time(), time.perf_counter()
    outcome, detail = "ok", None
    try:
        if kind == "resource":
            await client.read_resource(name)
        else:
            result = await client.call_tool(name, arguments)
            if result.is_error:
                outcome = "tool_error"
                detail = result.content[0].text[:300] if result.content else "tool error"  # type: ignore[union-attr]
    except MCPError as exc:
        if exc.code == RATE_LIMITED and not forbidden:
            outcome = "rate_limited"
        elif exc.code == HIDDEN and forbidden:
            outcome = "hidden"
        else:
            outcome, detail = "failed", f"{exc.code}: {exc}"[:300]
    except Exception as exc:  # a transport failure: counted and listed, the client goes on
        outcome, detail = "failed", f"{type(exc).__name__}: {exc}"[:300]
    seconds = time.perf_counter() - started
    if forbidden and outcome == "ok":
        outcome, detail = "failed", "a call the caller may not make was answered"
    return Call(spec.user, spec.index, seq, kind, name, category, sent, time.time(), seconds, outcome, detail)


async def run_client(url: str, spec: ClientSpec, targets: Targets, go: anyio.Event, ready: list[int],
                     out: list[Call]) -> None:
    """One client: connect, say so, wait for ``go``, make ``spec.calls`` calls one after the other."""
    writes = _Writes()
    async with http_client(spec.token) as http, session(url, http) as client:
        ready.append(spec.index)
        await go.wait()
        for seq in range(spec.calls):
            kind, name, arguments, forbidden = next_call(spec, seq, targets, writes)
            call = await one_call(client, spec, seq, kind, name, arguments, forbidden)
            if name == "query-create" and call.outcome == "ok":
                writes.created.append(arguments["name"])  # made: a later write deletes it
            out.append(call)


async def warm_up(url: str, token: str, targets: Targets) -> list[Call]:
    """One call of each kind the load makes, by a user of its own (its calls are audited like the others')."""
    spec = ClientSpec(WARM_USER[0], WARM_USER[1], token, -1, 0)
    calls: list[Call] = []
    async with http_client(token) as http, session(url, http) as client:
        for kind, name, arguments in (
                ("tool", "navigate", {"path": targets.dirs[0], "limit": 100}),
                ("tool", "inspect", {"path": targets.files[0]}),
                ("tool", "resource-search", targets.searches[0]), ("tool", "session-info", {}),
                ("tool", "plan-list", {}), ("tool", "list_users", {}), ("resource", RESOURCE, {}),
                ("tool", "query-create", {"name": "warm-query", "query": {"kind": "file"}}),
                ("tool", "query-delete", {"name": "warm-query"}),
                ("tool", "resource-set-modify", {"name": EDIT_SET, "operation": "add", "paths": [targets.files[0]]})):
            calls.append(await one_call(client, spec, len(calls), kind, name, arguments, False))
    return calls


async def _drive(url: str, specs: Sequence[ClientSpec], targets: Targets, barrier: Any,
                 warm_token: str | None) -> dict[str, Any]:
    warm = await warm_up(url, warm_token, targets) if warm_token else []
    go = anyio.Event()
    ready: list[int] = []
    calls: list[Call] = []
    async with anyio.create_task_group() as tg:
        for spec in specs:
            tg.start_soon(run_client, url, spec, targets, go, ready, calls)
        while len(ready) < len(specs):
            await anyio.sleep(0.01)
        await anyio.to_thread.run_sync(barrier.wait, 600.0)
        cpu0 = time.process_time()
        go.set()
    cpu = time.process_time() - cpu0  # the call phase's CPU (the sessions' close is a few ms of it)
    return {"calls": [asdict(c) for c in calls], "warm": [asdict(c) for c in warm], "cpu": cpu}


def client_process(url: str, specs: list[ClientSpec], targets: Targets, barrier: Any, warm_token: str | None,
                   out: str) -> None:
    """A worker process: its clients' calls, written to ``out`` as JSON."""
    Path(out).write_text(json.dumps(anyio.run(_drive, url, specs, targets, barrier, warm_token)))


def _wait_at(barrier: Any) -> None:
    try:
        barrier.wait(900.0)
    except threading.BrokenBarrierError:
        pass


def run_load(url: str, specs: list[ClientSpec], targets: Targets, *, procs: int, warm_token: str,
             scratch: Path, on_start: Any = None) -> dict[str, Any]:
    """Every client's calls, in ``procs`` spawned worker processes (the first also warms the server up first); the
    phase's wall time from the barrier to the last answer, and the workers' CPU seconds. ``on_start()`` is called
    when the calls start (the server's CPU and memory are read then)."""
    ctx = multiprocessing.get_context("spawn")
    procs = max(1, min(procs, len(specs)))
    barrier = ctx.Barrier(procs + 1)
    workers, outs = [], []
    for i in range(procs):
        out = scratch / f"load-{i}.json"
        outs.append(out)
        workers.append(ctx.Process(target=client_process, name=f"guard-load-{i}",
                                   args=(url, specs[i::procs], targets, barrier, warm_token if i == 0 else None,
                                         str(out))))
    for w in workers:
        w.start()
    waiting = threading.Thread(target=_wait_at, args=(barrier,), name="guard-load-barrier", daemon=True)
    waiting.start()
    while waiting.is_alive():  # the workers warm up and connect; one that dies first must not leave us waiting
        waiting.join(0.2)
        if any(w.exitcode not in (None, 0) for w in workers):
            barrier.abort()
            raise RuntimeError("a load worker failed before the calls started; see stderr")
    if barrier.broken:
        raise RuntimeError("the load workers were not ready within 900 s")
    started = time.time()
    before = on_start() if on_start is not None else None
    for w in workers:
        w.join()
    bad = [w.exitcode for w in workers if w.exitcode != 0]
    if bad:
        raise RuntimeError(f"a load worker failed (exit codes {bad}); see stderr")
    results = [json.loads(o.read_text()) for o in outs]
    calls = [Call(**c) for r in results for c in r["calls"]]
    warm = [Call(**c) for r in results for c in r["warm"]]
    ended = max((c.received for c in calls), default=started)
    return {"calls": calls, "warm": warm, "wall": ended - started, "client_cpu": sum(r["cpu"] for r in results),
            "procs": procs, "server_before": before, "started": started}


# --- the server's share ---------------------------------------------------------------------------------------------

def memory(pid: int) -> dict[str, int]:
    """Resident and peak resident memory (bytes) of process ``pid`` (VmRSS, VmHWM)."""
    out = {"rss": 0, "hwm": 0}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out["rss" if line.startswith("VmRSS") else "hwm"] = int(line.split()[1]) * 1024
    return out


def cpu_seconds(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and of its live children (the SQLite writer), from /proc."""
    total = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime
        for children in Path(f"/proc/{pid}/task").glob("*/children"):
            total += sum(cpu_seconds(int(child)) for child in children.read_text().split())
    return total


class RssTrace:
    """The resident memory of process ``pid``, sampled every ``every`` seconds on a thread: (epoch, bytes)."""

    def __init__(self, pid: int, every: float = 0.2) -> None:
        self.pid, self.every = pid, every
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="guard-rss", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.samples.append((time.time(), memory(self.pid)["rss"]))

    def __enter__(self) -> RssTrace:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def at(self, when: float) -> int:
        """The sample taken nearest to ``when`` (0 without samples)."""
        return min(self.samples, key=lambda s: abs(s[0] - when), default=(0.0, 0))[1]


# --- the checks ------------------------------------------------------------------------------------------------------

def accepted(call_outcome: str) -> bool:
    """A call the rate limiter counted: answered (well or with a tool error), not refused."""
    return call_outcome in ("ok", "tool_error")


def max_in_window(times: Sequence[float], window: float) -> int:
    """The most of ``times`` (sorted) in any half-open interval (t - window, t]."""
    best = 0
    for k, t in enumerate(times):
        best = max(best, k + 1 - bisect.bisect_right(times, t - window))
    return best


def client_window_check(calls: Iterable[Call], limits: dict[str, int]) -> dict[str, Any]:
    """From the clients' timestamps, which bracket the moment the server admitted each call ([sent, received]):
    the most accepted calls certainly inside one window (sent at or after its start, answered before its end) per
    user and category, which must not exceed the limit; and each refusal must have had at least the limit of
    accepted calls possibly inside its window."""
    groups: dict[tuple[str, str], list[Call]] = {}
    for c in calls:
        if c.category is not None and limits.get(c.category):
            groups.setdefault((c.user, c.category), []).append(c)
    most: dict[str, int] = {}
    early_refusals = 0
    for (user, category), group in groups.items():
        ok = sorted((c for c in group if accepted(c.outcome)), key=lambda c: c.sent)
        sent = [c.sent for c in ok]
        best = 0
        for i, c in enumerate(ok):
            end = bisect.bisect_left(sent, c.sent + WINDOW)
            best = max(best, sum(1 for d in ok[i:end] if d.received < c.sent + WINDOW))
        most[f"{user}/{category}"] = best
        for r in (c for c in group if c.outcome == "rate_limited"):
            possible = sum(1 for d in ok if d.received > r.sent - WINDOW and d.sent < r.received)
            early_refusals += possible < limits[category]
    return {"max_in_window": most, "early_refusals": early_refusals,
            "exact": all(most[key] <= limits[key.split("/")[1]] for key in most) and not early_refusals}


def read_audit(url: str, users: Iterable[str]) -> list[dict[str, Any]]:
    """The audit log's tool and resource records of ``users`` (read after the server closed it: all written)."""
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            t = audit_events.c
            rows = conn.execute(select(t.user, t.kind, t.name, t.outcome, t.time, t.duration_ms)
                                .where(t.user.in_(list(users)), t.kind.in_(["tool", "resource"]))).mappings()
            return [dict(r) for r in rows]
    finally:
        engine.dispose()


def audit_window_check(rows: Iterable[dict[str, Any]], limits: dict[str, int]) -> dict[str, Any]:
    """From the audit log: each call's admission time (its record's time less its duration), the most accepted
    calls in any window per user and category against the limit, and refusals made below the limit."""
    groups: dict[tuple[str, str], list[tuple[float, str]]] = {}
    for r in rows:
        if r["outcome"] == "denied":
            continue
        category = "read" if r["kind"] == "resource" else placement.category(r["name"])
        if limits.get(category):
            groups.setdefault((r["user"], category), []).append((r["time"] - (r["duration_ms"] or 0) / 1000,
                                                                 r["outcome"]))
    most: dict[str, int] = {}
    early_refusals = 0
    for (user, category), group in groups.items():
        ok = sorted(t for t, outcome in group if outcome in ("ok", "error"))
        most[f"{user}/{category}"] = max_in_window(ok, WINDOW - TOLERANCE)
        for t in (t for t, outcome in group if outcome == "rate_limited"):
            inside = bisect.bisect_right(ok, t + TOLERANCE) - bisect.bisect_right(ok, t - WINDOW - TOLERANCE)
            early_refusals += inside < limits[category]
    return {"max_in_window": most, "early_refusals": early_refusals,
            "exact": all(most[key] <= limits[key.split("/")[1]] for key in most) and not early_refusals}


def audit_completeness(calls: Iterable[Call], rows: Iterable[dict[str, Any]]) -> dict[str, Any]:
    """Calls made against audit records, counted by user and outcome (the client's outcome as the audit names it);
    complete when the two counts are equal."""
    made = Counter(f"{c.user}/{OUTCOME_IN_AUDIT.get(c.outcome, 'failed')}" for c in calls)
    logged = Counter(f"{r['user']}/{r['outcome']}" for r in rows)
    differences = {key: {"calls": made.get(key, 0), "audit": logged.get(key, 0)}
                   for key in sorted(set(made) | set(logged)) if made.get(key, 0) != logged.get(key, 0)}
    return {"calls": sum(made.values()), "records": sum(logged.values()), "by_user_outcome": dict(sorted(made.items())),
            "differences": differences, "complete": not differences}


def summary(calls: Sequence[Call]) -> dict[str, Any]:
    """Counts by outcome, the failures (up to 20 listed), the latencies of the accepted calls."""
    outcomes = Counter(c.outcome for c in calls)
    return {"made": len(calls), "outcomes": dict(outcomes),
            "failures": [f"{c.user} #{c.seq} {c.name}: {c.outcome}: {c.detail}" for c in calls
                         if c.outcome in ("failed", "tool_error")][:20],
            "accepted_seconds": [c.seconds for c in calls if c.outcome == "ok"],
            "forbidden": sum(1 for c in calls if c.category is None),
            "by_name": dict(Counter(c.name for c in calls))}


def user_table(calls: Sequence[Call], rows: Sequence[dict[str, Any]], roles: dict[str, str]) -> str:
    """A markdown table per user: calls and their outcomes, accepted reads and writes, the audit's records."""
    lines = ["| user | role | calls | answered | rate-limited | hidden | other | accepted read / write | "
             "audit records |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for user, role in roles.items():
        mine = [c for c in calls if c.user == user]
        out = Counter(c.outcome for c in mine)
        reads = sum(1 for c in mine if accepted(c.outcome) and c.category == "read")
        writes = sum(1 for c in mine if accepted(c.outcome) and c.category == "write")
        other = len(mine) - out["ok"] - out["rate_limited"] - out["hidden"]
        lines.append(f"| {user} | {role} | {len(mine):,} | {out['ok']:,} | {out['rate_limited']:,} | "
                     f"{out['hidden']:,} | {other:,} | {reads:,} / {writes:,} | "
                     f"{sum(1 for r in rows if r['user'] == user):,} |")
    return "Per user:\n\n" + "\n".join(lines)
