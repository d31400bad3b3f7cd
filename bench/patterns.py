"""Benchmark of caller-supplied patterns and the statement time limit: what RE2 and the per-statement deadline cost.

    .venv/bin/python bench/patterns.py [--entries 100000] [--repeat 5]

Builds a store of N entries (no files on disk: rows only), then times, median of --repeat runs:

- a regex fuzzy-match over every name (``report_\\d{4}\\.pdf``) through the store's REGEXP (RE2), against the same
  query with Python's ``re.search`` registered as REGEXP (what SQLAlchemy registers), and ``LIKE`` as the floor;
- the catastrophic ``^(a+)+$`` over one name of a's and "!": RE2, and Python's re at growing lengths (each extra
  "a" doubles it; the server used to stall at 34);
- a full scan of entries with the statement time limit on and off (the cost of the progress handler).
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import func, select, text  # noqa: E402

from dsl.regex import regex_search  # noqa: E402
from store.engine import make_engine  # noqa: E402
from store.entries import T  # noqa: E402
from store.patterns import match_clause  # noqa: E402


def fill(engine, n: int) -> None:
    now = time.time()
    rows = [{"path": f"/bench/d{i // 1000}/" + (f"report_{i % 10000:04d}.pdf" if i % 7 == 0 else f"f{i}.txt"),
             "parent": f"/bench/d{i // 1000}", "name": f"report_{i % 10000:04d}.pdf" if i % 7 == 0 else f"f{i}.txt",
             "extension": ".pdf" if i % 7 == 0 else ".txt", "kind": "file", "size": i, "mtime": now, "ctime": now,
             "depth": 2, "indexed_at": now} for i in range(n)]
    with engine.begin() as conn:
        conn.execute(T.insert(), rows)


def median_time(fn, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def count(engine, clause, *, python_re: bool = False) -> int:
    with engine.connect() as conn:
        if python_re:  # the REGEXP SQLAlchemy registers: Python's re.search
            conn.connection.driver_connection.create_function(
                "regexp", 2, lambda p, v: None if v is None else re.search(p, v) is not None, deterministic=True)
        try:
            return conn.execute(select(func.count()).select_from(T).where(clause)).scalar_one()
        finally:
            conn.invalidate()  # never hand a connection with Python's REGEXP back to the pool


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--entries", type=int, default=100_000)
    p.add_argument("--repeat", type=int, default=5)
    args = p.parse_args(argv)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory(prefix="assay-bench-patterns-") as tmp:
        limited = make_engine(f"sqlite:///{tmp}/a.db", statement_timeout=30)
        unlimited = make_engine(f"sqlite:///{tmp}/a.db", statement_timeout=None)
        fill(limited, args.entries)
        regex = match_clause(T.c.name, pattern=r"report_\d{4}\.pdf", mode="regex", case_sensitive=True,
                             dialect="sqlite")
        like = match_clause(T.c.name, pattern="report_", mode="prefix", case_sensitive=True, dialect="sqlite")
        expected = count(limited, regex)
        assert expected == len(range(0, args.entries, 7)) == count(limited, regex, python_re=True)
        n = f"{args.entries:,} names"
        rows.append((f"regex over {n}, RE2 (the store's REGEXP)",
                     f"{median_time(lambda: count(limited, regex), args.repeat):.3f} s"))
        rows.append((f"regex over {n}, Python re.search as REGEXP (before)",
                     f"{median_time(lambda: count(limited, regex, python_re=True), args.repeat):.3f} s"))
        rows.append((f"LIKE prefix over {n} (the floor)",
                     f"{median_time(lambda: count(limited, like), args.repeat):.3f} s"))
        evil = "a" * 34 + "!"
        rows.append(("^(a+)+$ over 34 a's and '!', RE2",
                     f"{median_time(lambda: regex_search('^(a+)+$', evil), args.repeat) * 1e6:.1f} µs"))
        for k in (16, 18, 20, 22):
            rows.append((f"^(a+)+$ over {k} a's and '!', Python re",
                         f"{median_time(lambda k=k: re.search('^(a+)+$', 'a' * k + '!'), 1):.3f} s"))
        scan = text("SELECT count(*) FROM entries WHERE size % 3 = 1 AND name LIKE '%9%'")
        for label, engine in (("on (30 s)", limited), ("off", unlimited)):
            def run(engine=engine):
                with engine.connect() as conn:
                    conn.execute(scan).scalar_one()
            rows.append((f"full scan of {args.entries:,} entries, statement time limit {label}",
                         f"{median_time(run, args.repeat):.3f} s"))
        limited.dispose()
        unlimited.dispose()
    width = max(len(r[0]) for r in rows)
    print(f"| {'measure'.ljust(width)} | time |\n| {'-' * width} | --- |")
    for label, value in rows:
        print(f"| {label.ljust(width)} | {value} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
