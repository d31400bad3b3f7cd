"""What the soak's load left, checked over MCP once it stopped: the watched plan's set against the watched folder,
the moved files against the disk and the index, db-diagnose, and check_integrity (the text and vector indexes against
the store). What the server finishes in the background (the watched plan's last files, the indexes' catching up) is
waited for, up to a limit, and the wait reported."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
from mcp import Client

from bench.guard_load import http_client, session
from bench.soak_load import DROP_SET, ClientState
from bench.soak_setup import call_or_raise


async def _drop_members(client: Client) -> list[str]:
    answer = await call_or_raise(client, "resource-set-get", {"name": DROP_SET, "include_entries": True, "limit": 1000})
    return sorted(e["path"] for e in answer.get("entries", []))


async def watched_set_check(client: Client, on_disk: list[str], *, timeout: float) -> dict[str, Any]:
    """Wait (up to ``timeout`` s) until the watched plan's set holds exactly the texts in the folder."""
    started = time.monotonic()
    while True:
        members = await _drop_members(client)
        if members == on_disk or time.monotonic() - started > timeout:
            break
        await anyio.sleep(0.5)
    return {"match": members == on_disk, "on_disk": len(on_disk), "members": len(members),
            "waited": time.monotonic() - started,
            "missing": sorted(set(on_disk) - set(members))[:5], "extra": sorted(set(members) - set(on_disk))[:5]}


async def movers_check(client: Client, states: list[ClientState]) -> dict[str, Any]:
    """Every moved file where its client last put it, once: on disk (in that folder, not the other) and in the index
    (each folder's entries, by navigate, are the files on disk there)."""
    problems: list[str] = []
    files = 0
    for state in states:
        for name, side in state.where.items():
            files += 1
            here, there = state.files.moves[side] / name, state.files.moves[1 - side] / name
            if not here.is_file() or there.exists():
                problems.append(f"{state.files.name}/{name}: expected in {here.parent.name} only; on disk: "
                                f"{here.is_file()} there, {there.exists()} in {there.parent.name}")
        for folder in state.files.moves:
            listed = await call_or_raise(client, "navigate", {"path": str(folder), "limit": 100})
            indexed = sorted(e["name"] for e in listed.get("entries", []))
            disk = sorted(p.name for p in Path(folder).iterdir())
            if indexed != disk:
                problems.append(f"{folder}: index {indexed} but disk {disk}")
    return {"files": files, "ok": not problems, "problems": problems[:10]}


def diagnose_ok(d: dict[str, Any]) -> bool:
    """db-diagnose's answer is sound: healthy, integrity ok (on SQLite; PostgreSQL has no such check), no orphaned
    entries, no rows pointing at nothing, no orphaned or missing cache files."""
    cache = d.get("artifact_cache") or {}
    return bool(d.get("healthy")) and (d.get("integrity_check") == "ok" or d.get("backend") != "sqlite") and (
        d.get("orphaned_entries") == 0 and not any((d.get("orphaned_records") or {}).values())
        and not cache.get("orphan_files") and not cache.get("missing_files"))


async def final_checks(url: str, states: list[ClientState], drop_on_disk: list[str], *,
                       settle: float) -> dict[str, Any]:
    """What the load left, checked after it stopped (see the module docstring)."""
    async with http_client(None) as http, session(url, http) as client:
        watched = await watched_set_check(client, drop_on_disk, timeout=settle)
        movers = await movers_check(client, states)
        diagnosis = await call_or_raise(client, "db-diagnose", {})
        integrity = await integrity_check(client, timeout=settle)
    return {"watched": watched, "movers": movers, "diagnose": diagnosis, "diagnose_ok": diagnose_ok(diagnosis),
            "integrity": integrity}


async def integrity_check(client: Client, *, timeout: float) -> dict[str, Any]:
    """check_integrity until it finds nothing (up to ``timeout`` s): the text and vector indexes catch up with the
    store in the background, so right after the load the last texts extracted may not be in them yet."""
    started = time.monotonic()
    first: list[str] | None = None
    while True:
        answer = await call_or_raise(client, "check_integrity", {"fix": False})
        problems = list(answer.get("problems", []))
        first = problems if first is None else first
        if answer.get("healthy") or time.monotonic() - started > timeout:
            break
        await anyio.sleep(1.0)
    return {"healthy": answer.get("healthy"), "problems": problems, "first_problems": first,
            "waited": time.monotonic() - started, "text_index": answer.get("text_index"),
            "vector_index": answer.get("vector_index")}
