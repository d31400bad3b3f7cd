"""Per-user rate limits (reference 004): so many calls of a category per user in any window of a minute, shared by
every session of the user (a buggy agent loop in two clients still meets one limit).

The limit is exact: a sliding log of each (user, category)'s accepted calls in the window, so no 60-second stretch
ever holds more than the limit (a fixed-window counter lets twice the limit through across a window's edge). A
refused call does not count, and says when the oldest call in the window leaves it (the retry-after).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Refusal:
    category: str
    limit: int
    window: float
    retry_after: float  # seconds until one more call of the category is accepted


class RateLimiter:
    """``limits``: category -> calls per ``window`` seconds (0: unlimited)."""

    def __init__(self, limits: Mapping[str, int], *, window: float = 60.0, clock=time.monotonic) -> None:
        self.limits = dict(limits)
        self.window = window
        self.clock = clock
        self._calls: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def take(self, user: str, category: str) -> Refusal | None:
        """Count one call of ``category`` by ``user`` and return None; or, when the user is at the limit, count
        nothing and return the refusal."""
        limit = self.limits.get(category, 0)
        if limit <= 0:
            return None
        now = self.clock()
        with self._lock:
            calls = self._calls.setdefault((user, category), deque())
            while calls and calls[0] <= now - self.window:
                calls.popleft()
            if len(calls) >= limit:
                return Refusal(category, limit, self.window, round(calls[0] + self.window - now, 3))
            calls.append(now)
            if len(self._calls) > 10_000:  # forget users idle for a whole window
                self._forget(now)
            return None

    def usage(self, user: str) -> dict[str, int]:
        """Calls of each category ``user`` made in the current window."""
        now = self.clock()
        with self._lock:
            return {category: sum(1 for t in self._calls.get((user, category), ()) if t > now - self.window)
                    for category in self.limits}

    def _forget(self, now: float) -> None:
        for key in [k for k, calls in self._calls.items() if not calls or calls[-1] <= now - self.window]:
            del self._calls[key]
