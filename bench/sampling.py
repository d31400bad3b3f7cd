"""What a run gets from the machine and what it takes: the cores it can get now (one busy loop per core), and the
peak RSS and CPU seconds of this process and its children, sampled on a thread (the classification and documents
benchmarks).
"""

from __future__ import annotations

import os
import threading
import time


class ProcessSampler:
    """Samples this process and its descendants every ``interval`` s: the peak of their summed RSS (leaving out
    Prefect's API server, reported apart), this process's peak, the largest single worker's peak."""

    def __init__(self, interval: float = 0.02) -> None:
        import psutil

        self.me = psutil.Process()
        self.interval = interval
        self.peak_sum = self.peak_main = self.peak_worker = self.peak_prefect = 0
        self._stop = threading.Event()
        self._kinds: dict[int, str] = {}
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _kind(self, proc) -> str:
        kind = self._kinds.get(proc.pid)
        if kind is None:
            try:
                cmd = " ".join(proc.cmdline())
            except Exception:
                return "other"
            kind = "prefect" if "flows.prefect_server" in cmd else "tracker" if "resource_tracker" in cmd else \
                "worker" if "multiprocessing" in cmd else "tool"
            self._kinds[proc.pid] = kind
        return kind

    def sample(self) -> None:
        total = 0
        try:
            main = self.me.memory_info().rss
            children = self.me.children(recursive=True)
        except Exception:
            return
        total = main
        for child in children:
            try:
                rss = child.memory_info().rss
            except Exception:
                continue
            kind = self._kind(child)
            if kind == "prefect":
                self.peak_prefect = max(self.peak_prefect, rss)
                continue
            if kind == "worker":
                self.peak_worker = max(self.peak_worker, rss)
            total += rss
        self.peak_main = max(self.peak_main, main)
        self.peak_sum = max(self.peak_sum, total)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def start(self) -> "ProcessSampler":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def cpu_seconds(self) -> dict[str, float]:
        """CPU seconds so far by part: ``main`` (this process and its reaped children), ``workers`` (live
        descendants: the pool's workers), ``prefect`` (Prefect's API server)."""
        t = self.me.cpu_times()
        out = {"main": t.user + t.system + t.children_user + t.children_system, "workers": 0.0, "prefect": 0.0}
        for child in self.me.children(recursive=True):
            try:
                c = child.cpu_times()
                out["prefect" if self._kind(child) == "prefect" else "workers"] += c.user + c.system
            except Exception:
                continue
        return out


def _burn(start_at: float, seconds: float) -> float:
    """Wait until ``start_at`` (epoch seconds), spin for ``seconds``; returns the CPU seconds this process got."""
    time.sleep(max(0.0, start_at - time.time()))
    cpu0, end = time.process_time(), time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass
    return time.process_time() - cpu0


def available_cores(seconds: float = 1.0) -> float:
    """How many cores this run can get now: one busy loop per core, all spinning over the same ``seconds``, CPU
    seconds / wall seconds (the machine is shared: other jobs' load takes its part)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    n = os.cpu_count() or 1
    with ProcessPoolExecutor(n, mp_context=multiprocessing.get_context("spawn")) as pool:
        list(pool.map(time.sleep, [0.2] * n))  # the workers are up (spawned, imported) before the clock starts
        start_at = time.time() + 0.2
        return sum(pool.map(_burn, [start_at] * n, [seconds] * n)) / seconds
