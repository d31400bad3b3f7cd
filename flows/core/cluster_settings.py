"""The ``cluster`` section of the settings: running plans on a Prefect work pool, its workers on other machines,
sharing one PostgreSQL store and one artifact cache (README "Running on several machines")."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from flows.env import Env

Expanded = AfterValidator(lambda p: p.expanduser() if isinstance(p, Path) else p)


class ClusterSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    work_pool: Annotated[str | None, Env("ASSAY_WORK_POOL")] = Field(
        None, min_length=1, description="run plan executions on this Prefect work pool (its workers: `assay worker "
                                        "--pool NAME`); none: in the serving process")
    cache_dir: Annotated[Path | None, Env("ASSAY_CACHE_DIR"), Expanded] = Field(
        None, description="the artifact cache (thumbnails, excerpts, clips, Prefect's task parameters); shared by "
                          "every machine of a pool; none: cache/ in the data dir")
    worker_name: Annotated[str | None, Env("ASSAY_WORKER_NAME")] = Field(
        None, min_length=1, description="this worker's name in the pool (none: <host>-<pid>)")
    batch_entries: Annotated[int | None, Env("ASSAY_BATCH_ENTRIES")] = Field(
        None, ge=1, description="entries per outcome batch spread over the pool; none: enough batches to keep every "
                                "worker busy (8 per worker), each at least min_batch_entries")
    min_batch_entries: Annotated[int, Env("ASSAY_MIN_BATCH_ENTRIES")] = Field(
        20, ge=1, description="the fewest entries in an outcome batch spread over the pool (a batch's claim and "
                              "record in the store stay small against its work)")
    lease_seconds: Annotated[float, Env("ASSAY_BATCH_LEASE")] = Field(
        4.0, ge=1.0, description="a batch whose worker has not renewed its lease for this long is handed to another "
                                 "(workers renew every lease_seconds / 4; on PostgreSQL a killed worker's batch "
                                 "goes at once)")
