"""One plan run timed to its end, as the classify and documents benchmarks measure it: wall seconds, the CPU each
part used (this process, the pool workers; Prefect's API server counted apart) and the outcome's counters."""

from __future__ import annotations

import time

from bench.sampling import ProcessSampler


def run_plan(service, plan, *, use_prefect: bool | None = None, sampler: ProcessSampler | None = None) -> dict:
    """Run ``plan`` to its end; returns seconds, cores busy and the outcome's counters."""
    service.save(plan, create=None)
    cpu0 = sampler.cpu_seconds() if sampler else {}
    started = time.perf_counter()
    row = service.execute(plan, wait=True, scan=False, use_prefect=use_prefect)
    seconds = time.perf_counter() - started
    cpu = {k: v - cpu0[k] for k, v in sampler.cpu_seconds().items()} if sampler else {}
    if row["status"] not in ("success", "partial"):
        raise RuntimeError(f"plan {plan.name} ended {row['status']}: {row['error_message']}")
    outcome = row["summary"]["rules"][plan.rules[0].name]["outcomes"][0]
    ours = cpu.get("main", 0.0) + cpu.get("workers", 0.0)  # Prefect's API server is counted apart
    return {"seconds": seconds, "cores": ours / seconds if seconds else 0.0, "cpu": cpu, "status": row["status"],
            "matched": row["entries_matched"], "applied": outcome["applied"], "errors": outcome["errors"],
            "error_samples": outcome["error_samples"]}
