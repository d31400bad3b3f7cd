"""Continuous plans: a watcher per filesystem source keeps the index current (``flows.index.watch.TreeWatcher``:
debounced, settled files only, partial-download names ignored, deletes and renames handled, catching up at start on
what changed while nobody watched), and every batch of changed entries runs the plan's rules on just those entries.

Which sources are watched: every filesystem source of a ``continuous`` plan, and ``filesystem.watch`` sources of any
plan. Watching starts when such a plan is executed, resumes at server start for plans that had started, and stops
when the plan is paused, disabled or deleted (plan-update / plan-delete).
"""

from __future__ import annotations

import functools
import logging
import threading

from dsl.model import Plan
from flows.index.watch import TreeWatcher
from flows.plans.checks import resolved_paths
from flows.plans.selection import is_watched
from store import plans as store_plans

log = logging.getLogger(__name__)


def watched_sources(plan: Plan):
    for source in plan.sources:
        if is_watched(plan, source):
            yield source


class PlanWatchers:
    def __init__(self, service) -> None:
        self.service = service
        self._watchers: dict[str, list] = {}
        self._lock = threading.Lock()

    def wants(self, plan: Plan) -> bool:
        return any(True for _ in watched_sources(plan))

    def is_watching(self, name: str) -> bool:
        with self._lock:
            return name in self._watchers

    def status(self, name: str) -> list[dict]:
        with self._lock:
            watchers = list(self._watchers.get(name, []))
        return [{"paths": w.paths, "running": w.running, "last_error": w.last_error} for w in watchers]

    def ensure(self, plan: Plan) -> None:
        if plan.status == "active" and self.wants(plan) and not self.is_watching(plan.name):
            self._start(plan)

    def restart(self, plan: Plan) -> None:
        self.stop(plan.name)
        self.ensure(plan)

    def _start(self, plan: Plan) -> None:
        watchers = []
        for source in watched_sources(plan):
            cfg = source.config
            watcher = TreeWatcher(self.service.engine, resolved_paths(source, self.service.roots, plan.base_dir),
                                  recursive=cfg.recursive, include_hidden=cfg.include_hidden,
                                  exclude=list(cfg.exclude), debounce_ms=cfg.debounce_ms,
                                  follow_symlinks=cfg.follow_symlinks, name=f"{plan.name}/{source.name}",
                                  on_change=functools.partial(self._on_change, plan.name))
            watchers.append(watcher)
        with self._lock:
            self._watchers[plan.name] = watchers
        for watcher in watchers:
            watcher.start()
        log.info("plan %s watching %d source(s)", plan.name, len(watchers))

    def _on_change(self, name: str, changes) -> None:
        try:
            row = store_plans.find_plan(self.service.engine, name=name)
            if row is None:
                return
            plan = self.service.load(name)
            if plan.status != "active":
                return
            if changes.full_rescan:
                self.service.execute(plan, wait=True, trigger="watch", scan=False)
            elif changes.entry_ids:
                row = self.service.execute(plan, wait=True, trigger="watch", scan=False, use_prefect=False,
                                           restrict_ids=list(changes.entry_ids))
                if row["status"] == "partial" and not row["outcomes_applied"] and \
                        row.get("error_message") in ("nothing matched", "the sources yielded no entries"):
                    # a change the plan has nothing to do with (a deletion, a file no rule wants): not history;
                    # a changed file an outcome failed on (an encrypted PDF) stays, with its error
                    store_plans.delete_execution(self.service.engine, execution_id=row["execution_id"])
        except Exception:  # a failed run is recorded on its execution; the watcher goes on
            log.exception("plan %s: acting on changes failed", name)

    def stop(self, name: str) -> None:
        with self._lock:
            watchers = self._watchers.pop(name, [])
        for watcher in watchers:
            watcher.stop()
        if watchers:
            log.info("plan %s stopped watching", name)

    def resume(self) -> None:
        for row in store_plans.list_plans(self.service.engine, status="active"):
            try:
                plan = self.service.load(row["name"])
            except Exception:
                log.warning("stored plan %s no longer validates; not resumed", row["name"])
                continue
            if not self.wants(plan):
                continue
            _, executed = store_plans.list_executions(self.service.engine, plan_name=plan.name, limit=1)
            if executed:
                self.ensure(plan)

    def shutdown(self) -> None:
        with self._lock:
            names = list(self._watchers)
        for name in names:
            self.stop(name)
