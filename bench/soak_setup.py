"""The soak's set-up, over MCP like the clients, before the load and its warm-up: the tree indexed, the documents
embedded, each client's plan and set made, the watched plan started."""

from __future__ import annotations

import json
import time
from typing import Any

from mcp import Client

from bench.guard_load import http_client, session
from bench.soak_corpus import Corpus
from bench.soak_load import ClientState, answer_of, client_plan, error_text, watch_plan


async def call_or_raise(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A set-up or check call: its answer; RuntimeError when the tool answers an error."""
    result = await client.call_tool(name, arguments)
    if result.is_error:
        raise RuntimeError(f"{name} {json.dumps(arguments)[:200]} failed: {error_text(result)}")
    return answer_of(result)


async def prepare(url: str, corpus: Corpus, states: list[ClientState], *, debounce_ms: int) -> dict[str, Any]:
    """The tree indexed (``index``, waited for), the documents embedded into the default collection (``index_files``),
    each client's plan and set made, the watched plan run once (it watches from then on). Returns the seconds each
    step took and what the first two found."""
    out: dict[str, Any] = {}
    async with http_client(None) as http, session(url, http) as client:
        started = time.monotonic()
        index = await call_or_raise(client, "index", {"root": str(corpus.root), "async": False, "force": True})
        out["index"] = {"seconds": time.monotonic() - started, "files": index.get("files"),
                        "directories": index.get("directories")}
        started = time.monotonic()
        embed = await call_or_raise(client, "index_files", {"folderPath": str(corpus.docs), "wait": True})
        out["index_files"] = {"seconds": time.monotonic() - started, "files": embed.get("files_indexed"),
                              "chunks": embed.get("chunks_total"), "failed": embed.get("files_failed")}
        if embed.get("status") != "success":
            raise RuntimeError(f"index_files ended {embed.get('status')}: {embed.get('errors')}")
        started = time.monotonic()
        for state in states:
            plan = json.dumps(client_plan(state.files))
            await call_or_raise(client, "plan-create", {"text": plan, "format": "json"})
            await call_or_raise(client, "resource-set-create", {"name": state.set_name, "description": "a client's"})
        await call_or_raise(client, "plan-create", {"text": json.dumps(watch_plan(corpus.drop, debounce_ms)),
                                            "format": "json"})
        await call_or_raise(client, "plan-execute", {"name": "soak-watch", "wait": True})
        out["plans_and_sets"] = {"seconds": time.monotonic() - started, "plans": len(states) + 1,
                                 "sets": len(states)}
    return out
