"""A directory of plan files kept in git: every plan file is loaded at start and reloaded when it changes; invalid
files are reported (plan-list's file_errors, the log) without stopping anything; plans created or updated over MCP
are written back, so the directory stays the source of truth.

Files: ``*.yaml`` / ``*.yml`` / ``*.json`` and DSL text in ``*.plan``. A plan loaded from a file is written back to
that file in its own format, changing only what changed (comments, key order and layout elsewhere stay; see
:mod:`flows.plans.file_edits`); a new plan goes to ``<name>.yaml``. Deleting a file deletes its plan.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from pathlib import Path
from typing import Any

from watchfiles import Change, watch

from dsl.errors import PlanError
from dsl.model import Plan
from dsl.parse import parse_plan_text
from dsl.printer import plan_to_dsl, plan_to_yaml
from flows.plans.file_edits import edit_plan_text
from store import plans as store_plans
from store.errors import AssayError

log = logging.getLogger(__name__)

PLAN_SUFFIXES = (".yaml", ".yml", ".json", ".plan")
_FORMATS = {".json": "json", ".plan": "dsl"}  # any other plan file is YAML


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class PlansDirectory:
    def __init__(self, path: str | Path, service) -> None:
        self.path = Path(path).expanduser().resolve()
        self.service = service
        self._errors: dict[str, str] = {}
        self._written: dict[str, str] = {}  # file -> digest of what we wrote (our own writes are not reloads)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    # -- loading --

    def plan_files(self):
        if not self.path.is_dir():
            return
        for entry in sorted(self.path.iterdir()):
            if entry.is_file() and entry.suffix.lower() in PLAN_SUFFIXES and not entry.name.startswith("."):
                yield entry

    def load_all(self) -> dict[str, Any]:
        self.path.mkdir(parents=True, exist_ok=True)
        loaded = []
        for file in self.plan_files():
            name = self.load_file(file)
            if name:
                loaded.append(name)
        log.info("plans directory %s: %d plan(s) loaded, %d file(s) with errors", self.path, len(loaded),
                 len(self._errors))
        return {"loaded": loaded, "errors": self.errors()}

    def load_file(self, file: Path) -> str | None:
        key = str(file)
        try:
            text = file.read_text()
        except OSError as exc:
            self._errors[key] = f"cannot read: {exc.strerror or exc}"
            return None
        if self._written.get(key) == _digest(text):
            return None  # our own write coming back
        try:
            plan = parse_plan_text(text, format=_FORMATS.get(file.suffix.lower(), "yaml"), source=file.name)
            plan.with_base_dir(str(self.path))
            existing = store_plans.find_plan(self.service.engine, name=plan.name)
            other = existing["origin_path"] if existing else None
            if other and other != key and Path(other).exists():
                self._errors[key] = (f"plan name {plan.name!r} is already defined in {Path(other).name}; a plan "
                                     "name must be unique in the plans directory (rename one of them)")
                log.warning("plan file %s not loaded: %s", file, self._errors[key])
                return None
            self.service.save(plan, create=None, origin_path=key, write_file=False)
        except (PlanError, AssayError) as exc:
            self._errors[key] = str(exc)
            log.warning("plan file %s not loaded: %s", file, exc)
            return None
        self._errors.pop(key, None)
        log.info("plan %s loaded from %s", plan.name, file)
        return plan.name

    def forget_file(self, file: Path) -> None:
        key = str(file)
        self._errors.pop(key, None)
        self._written.pop(key, None)
        for row in store_plans.list_plans(self.service.engine):
            if row["origin_path"] == key:
                try:
                    self.service.delete(row["name"])
                    log.info("plan %s deleted: its file %s was removed", row["name"], file)
                except AssayError as exc:
                    log.warning("could not delete plan %s: %s", row["name"], exc)

    def errors(self) -> list[dict[str, str]]:
        return [{"file": f, "error": e} for f, e in sorted(self._errors.items())]

    # -- writing back --

    def write(self, plan: Plan) -> str:
        existing = store_plans.find_plan(self.service.engine, name=plan.name)
        origin = existing["origin_path"] if existing else None
        target = Path(origin) if origin and Path(origin).parent == self.path else self.path / f"{plan.name}.yaml"
        format = _FORMATS.get(target.suffix.lower(), "yaml")
        text = None
        try:
            previous = target.read_bytes().decode()  # as it is, line ends too
        except (OSError, UnicodeDecodeError):  # a new file, or one that is not text
            previous = None
        if previous is not None:  # change only what changed: what people wrote in the file stays
            text = edit_plan_text(previous, plan, format)
        if text is None:
            text = plan_to_dsl(plan) if format == "dsl" else \
                json.dumps(plan.to_object(), indent=2) + "\n" if format == "json" else plan_to_yaml(plan)
        self.path.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.tmp")
        tmp.write_text(text, newline="")  # line ends as they are in text
        with self._lock:
            self._written[str(target)] = _digest(text.replace("\r\n", "\n"))  # as load_file reads it
        os.replace(tmp, target)
        return str(target)

    def remove(self, name: str, origin_path: str | None) -> None:
        if origin_path and Path(origin_path).parent == self.path and Path(origin_path).exists():
            with self._lock:
                self._written.pop(origin_path, None)
            Path(origin_path).unlink()

    # -- reloading on change --

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(target=self._watch, name="assay-plans-dir", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        try:
            for changes in watch(self.path, stop_event=self._stop, debounce=300, step=50, recursive=False):
                for change, raw in sorted(changes, key=lambda c: c[1]):
                    file = Path(raw)
                    if file.suffix.lower() not in PLAN_SUFFIXES or file.name.startswith("."):
                        continue
                    try:
                        if change == Change.deleted or not file.exists():
                            if str(file) in self._written or any(
                                    r["origin_path"] == str(file) for r in store_plans.list_plans(self.service.engine)):
                                self.forget_file(file)
                        else:
                            self.load_file(file)
                    except Exception:  # one bad file never stops the watcher
                        log.exception("reloading plan file %s failed", file)
        except Exception:
            log.exception("watching the plans directory %s stopped", self.path)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None
