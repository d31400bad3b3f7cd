"""Per-user rate limits: exact over any window (a sliding log), per user and category, refusals not counted."""

from __future__ import annotations

from mcp_server.guard.ratelimit import RateLimiter


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def test_no_window_holds_more_than_the_limit_and_the_refusal_says_when_to_retry():
    clock = Clock()
    limiter = RateLimiter({"read": 3}, window=60, clock=clock)
    for t in (0, 10, 20):
        clock.now = 1000 + t
        assert limiter.take("ann", "read") is None
    clock.now = 1059
    refused = limiter.take("ann", "read")
    assert refused is not None and refused.limit == 3 and refused.retry_after == 1.0
    clock.now = 1060  # the first call leaves the window: one more is accepted, and only one
    assert limiter.take("ann", "read") is None
    assert limiter.take("ann", "read") is not None
    clock.now = 1070
    assert limiter.take("ann", "read") is None


def test_users_and_categories_are_counted_apart_and_zero_means_unlimited():
    clock = Clock()
    limiter = RateLimiter({"read": 1, "write": 1, "sql": 0}, clock=clock)
    assert limiter.take("ann", "read") is None
    assert limiter.take("ann", "read") is not None
    assert limiter.take("bob", "read") is None
    assert limiter.take("ann", "write") is None
    assert all(limiter.take("ann", "sql") is None for _ in range(100))
    assert limiter.usage("ann") == {"read": 1, "write": 1, "sql": 0}


def test_a_refused_call_does_not_count():
    clock = Clock()
    limiter = RateLimiter({"read": 2}, window=60, clock=clock)
    limiter.take("ann", "read")
    limiter.take("ann", "read")
    for _ in range(50):
        assert limiter.take("ann", "read") is not None
    clock.now += 60
    assert limiter.take("ann", "read") is None and limiter.take("ann", "read") is None
