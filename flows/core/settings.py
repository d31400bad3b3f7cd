"""What a flow run needs to find its store and its roots when nothing but its parameters came with it (a run of a
deployment, in a subprocess or on a worker): read once from the environment that ``assay serve`` exported
(``export_for_runs``) or that the operator set.

Environment variables: ``ASSAY_DATA_DIR`` (default ``~/.assay``), ``ASSAY_DATABASE_URL`` (default the SQLite file
``assay.db`` in the data dir), ``ASSAY_ROOTS`` (folders separated by ``os.pathsep``; default the home directory).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Iterable

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict
from typing_extensions import Annotated

from flows.roots import Roots


class RunSettings(BaseSettings):
    """The store and roots of this process's flow runs."""

    model_config = SettingsConfigDict(env_prefix="ASSAY_", extra="ignore")

    data_dir: Path = Field(default=Path("~/.assay"), description="where assay keeps its store, caches and models")
    database_url: str | None = Field(default=None, description="the store (SQLAlchemy URL); default SQLite in the "
                                                                 "data dir")
    roots: Annotated[list[str], NoDecode] = Field(default_factory=list, description="folders callers may touch")

    @field_validator("roots", mode="before")
    @classmethod
    def _split_roots(cls, value: object) -> object:
        return [p for p in value.split(os.pathsep) if p.strip()] if isinstance(value, str) else value

    def model_post_init(self, _context: object) -> None:
        self.data_dir = self.data_dir.expanduser()

    @property
    def store_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'assay.db'}"

    def effective_roots(self) -> Roots:
        return Roots.of(self.roots or [str(Path.home())])


@lru_cache(maxsize=1)
def run_settings() -> RunSettings:
    """This process's run settings, read once."""
    return RunSettings()


def export_for_runs(*, data_dir: Path, store_url: str, roots: Iterable[str]) -> None:
    """Put a serving process's store and roots in its environment, so the runs it starts in subprocesses (Prefect's
    runner) find the same ones; called once at start, before any run."""
    os.environ["ASSAY_DATA_DIR"] = str(data_dir)
    os.environ["ASSAY_DATABASE_URL"] = store_url
    os.environ["ASSAY_ROOTS"] = os.pathsep.join(roots)
    run_settings.cache_clear()
