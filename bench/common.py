"""What the benchmarks share: the figure table they print, number formats and percentiles, and the served process's
peak memory."""

from __future__ import annotations

import json
import sys
from pathlib import Path


def secs(x: float) -> str:
    return f"{x:.3f} s" if x < 10 else f"{x:.1f} s"


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def render(facts: str, rows: list[tuple], notes: list[str], extra: str = "") -> str:
    """The table every benchmark prints: the machine, one row per figure (ours, baseline, ratio, goal, met?), the
    notes, and optionally a further section."""
    lines = [f"Machine: {facts}", "", "| figure | ours | baseline | ratio | goal | met? |",
             "| --- | --- | --- | --- | --- | --- |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    lines += [""] + [f"- {n}" for n in notes]
    if extra:
        lines += ["", extra.rstrip()]
    return "\n".join(lines) + "\n"


def publish(table: str, out: str | Path, fig: dict, json_path: str | Path | None = None) -> None:
    """Write the table to ``out`` (and every figure to ``json_path``), and print it."""
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(table)
    if json_path:
        Path(json_path).write_text(json.dumps(fig, indent=2, default=str) + "\n")
    sys.stdout.write(table)


def server_pid() -> int | None:
    """The pid of the ``assay serve`` this process started (an MCP client's child), if any."""
    import psutil

    for child in psutil.Process().children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
        except Exception:
            continue
        if "mcp_server.cli" in cmd and " serve" in cmd:
            return child.pid
    return None


def hwm_kb(pid: int | None) -> int:
    """Peak resident memory (VmHWM, kB) of ``pid``; 0 when unknown."""
    if pid is None:
        return 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


REPO = Path(__file__).resolve().parent.parent


def server_env(scratch: Path, **extra: str) -> dict[str, str]:
    """The environment of an ``assay serve`` a benchmark starts: ours without any PREFECT_/ASSAY_ setting of the
    caller's, Prefect's home in ``scratch``, no built-in documents plan (the benchmark indexes what it measures), and
    ``extra`` on top (ASSAY_DATA_DIR=..., HF_HUB_OFFLINE=1)."""
    import os

    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PREFECT_", "ASSAY_")) or k == "ASSAY_PREFECT_SEED"}  # a seed: fewer migrations only
    env.update(PYTHONPATH=str(REPO), PREFECT_HOME=str(Path(scratch) / "prefect-serve"),
               PREFECT_SERVER_ANALYTICS_ENABLED="false", ASSAY_DOCUMENTS_PLAN="off", PYTHONUNBUFFERED="1", **extra)
    return env


def payload(result, *, keys: tuple[str, ...] = ()) -> dict:
    """A tool call's answer: its structured content (when it has one of ``keys``, if given), else its text as JSON;
    RuntimeError with the text for a tool error."""
    if result.is_error:
        raise RuntimeError(f"tool error: {result.content[0].text if result.content else result}")
    structured = getattr(result, "structuredContent", None) or getattr(result, "structured_content", None)
    if isinstance(structured, dict) and (not keys or any(k in structured for k in keys)):
        return structured
    return json.loads(result.content[0].text)


def bench_logging(*also_quiet: str) -> None:
    """Progress on stderr at INFO; the libraries' and assay's own loggers (and ``also_quiet``) at WARNING only."""
    import logging

    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(name)s: %(message)s")
    for noisy in ("prefect", "httpx", "flows", "store", "mcp_server", *also_quiet):
        logging.getLogger(noisy).setLevel(logging.WARNING)
