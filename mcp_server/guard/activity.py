"""What this server has seen lately, kept in memory for the operator tools: the sessions that called it, the last
requests, and the last log records (``logs://recent``, ``get_recent_errors``). The audit database keeps the lasting
record; this is the live view, bounded, so memory stays flat however long the server runs."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Any

MAX_REQUESTS = 1000
MAX_LOG_RECORDS = 1000
MAX_SESSIONS = 1000


@dataclass
class Request:
    time: float
    kind: str  # tool | resource
    name: str
    user: str
    session: str | None
    outcome: str  # ok | error | denied | rate_limited
    error_code: str | None
    duration_ms: float


@dataclass
class Session:
    id: str
    user: str
    client: str | None
    source: str
    first_seen: float
    last_seen: float
    requests: int = 0
    errors: int = 0


@dataclass
class Activity:
    started: float = field(default_factory=time.time)
    requests: deque[Request] = field(default_factory=lambda: deque(maxlen=MAX_REQUESTS))
    sessions: dict[str, Session] = field(default_factory=dict)
    totals: dict[str, int] = field(default_factory=dict)  # outcome -> count since start
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def seen(self, session: str | None, user: str, client: str | None, source: str) -> None:
        """A request of ``session`` arrived (any method)."""
        if session is None:
            return
        now = time.time()
        with self._lock:
            known = self.sessions.get(session)
            if known is None:
                if len(self.sessions) >= MAX_SESSIONS:  # forget the one idle longest
                    del self.sessions[min(self.sessions.values(), key=lambda s: s.last_seen).id]
                known = self.sessions[session] = Session(session, user, client, source, now, now)
            known.last_seen = now
            if client and not known.client:
                known.client = client

    def done(self, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
            self.totals[request.outcome] = self.totals.get(request.outcome, 0) + 1
            known = self.sessions.get(request.session or "")
            if known is not None:
                known.requests += 1
                known.errors += request.outcome != "ok"

    def count(self, outcome: str) -> None:
        """One more ``outcome`` that is no request of a session (a refused authentication)."""
        with self._lock:
            self.totals[outcome] = self.totals.get(outcome, 0) + 1

    def recent_requests(self, limit: int, *, user: str | None = None, errors_only: bool = False) -> list[dict]:
        with self._lock:
            chosen = [r for r in reversed(self.requests) if (user is None or r.user == user)
                      and (not errors_only or r.outcome != "ok")]
        return [asdict(r) for r in chosen[:limit]]

    def session_list(self, idle_after: float) -> list[dict]:
        now = time.time()
        with self._lock:
            rows = sorted(self.sessions.values(), key=lambda s: s.last_seen, reverse=True)
            return [{**asdict(s), "idle_seconds": round(now - s.last_seen, 1),
                     "active": now - s.last_seen < idle_after} for s in rows]


class RecentLog(logging.Handler):
    """The last log records of the process (every logger at INFO and above), for ``logs://recent`` and the errors
    of ``get_recent_errors``."""

    def __init__(self, capacity: int = MAX_LOG_RECORDS) -> None:
        super().__init__(logging.INFO)
        self.records: deque[dict[str, Any]] = deque(maxlen=capacity)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string in someone's log call: keep what there is
            message = str(record.msg)
        entry = {"time": record.created, "level": record.levelname, "logger": record.name, "message": message[:4000]}
        if record.exc_info and record.exc_info[1] is not None:
            entry["exception"] = f"{type(record.exc_info[1]).__name__}: {record.exc_info[1]}"[:2000]
        self.records.append(entry)

    def recent(self, limit: int, *, min_level: int = logging.INFO) -> list[dict[str, Any]]:
        chosen = [r for r in reversed(self.records) if logging.getLevelName(r["level"]) >= min_level]
        return chosen[:limit]
