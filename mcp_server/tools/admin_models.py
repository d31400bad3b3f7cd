"""The results of the admin tools (reference 004's ServerInfo, MemoryStats, Session[], RequestLog[], Job[], JobRun[],
ErrorLog[], IntegrityReport, ...): typed, every field described, each result readable alone as JSON. Times are ISO
8601 in UTC; sizes are bytes."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from mcp_server.tools.database import DiagnoseResponse

# --- server introspection -----------------------------------------------------------------------------------------


class AuthInfo(BaseModel):
    required: bool = Field(description="HTTP callers must present a bearer token (server.auth); under stdio the "
                                       "caller is the local operator")
    methods: list[str] = Field(description="what callers authenticate with: local API tokens (assay tokens "
                                           "create), JWTs of an identity provider")
    jwt_issuer: str | None = Field(description="the identity provider whose JWTs are accepted (guard.jwt_issuer)")
    local_permissions: list[str] = Field(description="permissions of the local operator (stdio, or loopback HTTP "
                                                     "without auth)")


class StoreInfo(BaseModel):
    backend: str = Field(description="sqlite or postgresql")
    url: str = Field(description="the store's URL, its password hidden")
    location: str = Field(description="the SQLite file, or the URL again for another backend")


class ServerInfo(BaseModel):
    version: str = Field(description="assay's version")
    started_at: str = Field(description="when this server started")
    uptime_seconds: float = Field(description="seconds since it started")
    pid: int = Field(description="the server's process id")
    python_version: str
    transport: str = Field(description="stdio, or http (Streamable HTTP at /mcp)")
    address: str | None = Field(description="the MCP endpoint the HTTP server binds (http://HOST:PORT/mcp); none "
                                            "under stdio")
    public_url: str | None = Field(description="server.public_url: the address clients reach behind a proxy")
    auth: AuthInfo
    store: StoreInfo
    audit_url: str | None = Field(description="the audit database (password hidden); none when auditing is off")
    data_dir: str
    roots: list[str] = Field(description="directories callers may touch")
    tool_groups: list[str] = Field(description="tool groups this server serves")
    prefect_url: str | None = Field(description="the Prefect API this server reports to; none when Prefect is off "
                                                "or not up yet")
    sessions: int = Field(description="MCP sessions seen since start (list_active_sessions lists them)")
    requests: dict[str, int] = Field(description="tool calls and resource reads since start, by outcome (ok, "
                                                 "error, denied, rate_limited; unauthenticated: refused tokens)")


class DiskUsage(BaseModel):
    path: str | None = Field(description="where it is on disk (the store's URL for a server database)")
    files: int | None = Field(description="files it holds (none: a server database)")
    bytes: int | None = Field(description="bytes on disk (none: unknown)")


class ProcessMemory(BaseModel):
    rss_bytes: int = Field(description="resident memory of the server process")
    vms_bytes: int = Field(description="virtual memory of the server process")
    threads: int
    open_files: int | None = Field(description="files the process has open (none: not readable here)")


class PoolStatus(BaseModel):
    status: str = Field(description="SQLAlchemy's own summary of the store's connection pool")
    size: int | None = Field(description="connections the pool keeps")
    checked_out: int | None = Field(description="connections in use now")
    overflow: int | None = Field(description="connections beyond the pool's size in use now")


class TextIndexState(BaseModel):
    directory: str
    files: int
    bytes: int
    segments: int
    documents: int = Field(description="documents whose text the index holds")
    pending: int = Field(description="documents changed in the store and not indexed yet (0 once a rebuild is "
                                     "done)")
    writer: bool = Field(description="this process writes the index (else another process does)")


class VectorCollectionState(BaseModel):
    name: str
    vectors: int = Field(description="vectors of the collection in the store")
    file_bytes: int = Field(description="bytes of its hnswlib files")
    ready: bool = Field(description="this process has its index loaded (false while it is being rebuilt, or "
                                    "before the first search)")
    indexed: int | None = Field(description="vectors in the loaded index")


class VectorIndexState(BaseModel):
    directory: str
    files: int
    bytes: int
    collections: list[VectorCollectionState]


class MemoryStats(BaseModel):
    process: ProcessMemory
    pool: PoolStatus
    disk: dict[str, DiskUsage] = Field(description="store, artifact_cache (thumbnails, timelines, excerpts), "
                                                   "text_index, vector_index, model_exports")
    text_index: TextIndexState | None = Field(description="the full-text index; none when it cannot be read")
    vector_index: VectorIndexState | None = Field(description="the semantic index; none when it cannot be read")
    counts: dict[str, int] = Field(description="sessions, recent_requests and log_records kept in memory, and the "
                                               "audit writer's queued / dropped records")
    problems: list[str] = Field(description="parts that could not be measured, and why")


class SessionInfo(BaseModel):
    id: str = Field(description="the MCP session id (HTTP), or stdio")
    user: str
    client: str | None = Field(description="the client's name/version from its handshake")
    source: str = Field(description="how it authenticated: local, token or jwt")
    first_seen: str
    last_seen: str
    idle_seconds: float
    active: bool = Field(description="seen within the idle timeout")
    requests: int
    errors: int = Field(description="its calls that did not end ok")


class SessionList(BaseModel):
    sessions: list[SessionInfo] = Field(description="most recently seen first")
    total: int
    active: int
    idle_after_seconds: float = Field(description="a session unseen this long is no longer active")


class RequestLog(BaseModel):
    time: str
    kind: str = Field(description="tool or resource")
    name: str = Field(description="the tool's name or the resource's URI")
    user: str
    session: str | None
    outcome: str = Field(description="ok, error, denied or rate_limited")
    error_code: str | None
    duration_ms: float


class RequestList(BaseModel):
    requests: list[RequestLog] = Field(description="newest first")
    total: int = Field(description="requests returned")
    kept: int = Field(description="requests the server keeps in memory (the newest; the audit log keeps all)")


class ErrorLog(BaseModel):
    time: str
    source: Literal["request", "log", "audit"] = Field(
        description="request: a call that did not end ok; log: a log record at WARNING or above; audit: the audit "
                    "writer failing")
    message: str
    level: str | None = Field(description="the log record's level, or the call's outcome")
    name: str | None = Field(description="the tool or resource called, or the logger")
    user: str | None = None


class ErrorList(BaseModel):
    errors: list[ErrorLog] = Field(description="newest first")
    total: int


class ConfigResult(BaseModel):
    settings: dict[str, Any] = Field(description="the effective settings by section (as the config file names "
                                                 "them), secrets replaced by [redacted] and URL passwords by ***")
    derived: dict[str, Any] = Field(description="what the settings imply: the store's URL (database.url, else "
                                                "assay.db in the data dir), the roots in effect, the audit database")
    redacted: list[str] = Field(description="the settings whose value was hidden (dotted keys)")


# --- jobs ---------------------------------------------------------------------------------------------------------


class JobRun(BaseModel):
    id: str | None = Field(description="execution:<id> (a plan's) or job:<id> (an index, classify or plan run); "
                                       "none for a live source's catch-up, which has no run of its own")
    status: str
    trigger: str | None = Field(description="what started it: manual, watch, schedule (executions), or the run's "
                                            "kind")
    started_at: str | None
    completed_at: str | None
    duration_ms: int | None
    counts: dict[str, int | None] = Field(description="entries processed / matched / outcomes applied, or files / "
                                                      "directories / removed / errors")
    error: str | None


class JobInfo(BaseModel):
    id: str = Field(description="plan:<name>, source:<name> or job:<id>: what the other job tools take")
    type: Literal["plan", "source", "job"]
    name: str
    status: str = Field(description="a plan's active / paused / disabled, a source's running / stopped / error, a "
                                    "run's pending / running")
    enabled: bool | None = Field(description="a plan that runs (active), a source that starts with the server")
    mode: str = Field(description="a plan's oneshot / continuous, a source's live / manual, a run's kind")
    path: str | None = Field(description="a source's folder, a run's root, a plan's file")
    running: bool = Field(description="executing or watching now")
    watching: bool = Field(description="a continuous plan or a live source watching its folders")
    last_run: JobRun | None
    run: str | None = Field(default=None, description="the run in flight (job:<id>) of a manual source")
    progress: float | None = Field(default=None, description="a run's progress (0-100)")
    description: str | None = None


class JobList(BaseModel):
    jobs: list[JobInfo] = Field(description="plans, then sources, then the runs pending or running")
    total: int


class JobHistory(BaseModel):
    job_id: str
    type: Literal["plan", "source", "job"]
    runs: list[JobRun] = Field(description="newest first")
    total: int = Field(description="runs there are in all")
    note: str | None = None


class JobAction(BaseModel):
    job_id: str
    action: Literal["triggered", "enabled", "disabled"]
    changed: bool = Field(description="false when it was so already (already running, enabled, disabled)")
    status: str = Field(description="the job's status now")
    execution_id: int | None = Field(description="the plan execution started")
    run: str | None = Field(description="the run started (job:<id>), followed with get_job_history")
    message: str


# --- upkeep -------------------------------------------------------------------------------------------------------


class TextIndexCheck(BaseModel):
    directory: str
    documents: int = Field(description="documents the index holds")
    searchable: int = Field(description="documents with searchable text in the store")
    pending: int = Field(description="documents the index is catching up on (not a problem)")
    missing: int = Field(description="searchable documents the index neither holds nor has queued")
    stale: int = Field(description="documents the index holds that the store no longer has searchable")
    missing_samples: list[str]
    stale_samples: list[str]
    corrupt_segments: list[dict[str, str]] = Field(description="segment files failing their checksums now")
    matches: bool


class VectorCheck(BaseModel):
    name: str = Field(description="the collection")
    status: str = Field(description="ok, empty, behind (caught up at the next search), missing, unusable or "
                                    "mismatch")
    detail: str
    vectors: int = Field(description="vectors in the store")


class Repair(BaseModel):
    target: str = Field(description="artifact_cache, text_index or vector_index")
    action: str
    count: int = Field(description="files, rows or collections concerned")
    detail: str


class IntegrityReport(BaseModel):
    healthy: bool = Field(description="nothing was found wrong (before any repair)")
    problems: list[str] = Field(description="what was found wrong, each with what repairs it")
    store: DiagnoseResponse = Field(description="db-diagnose's checks of the store and its artifact cache")
    text_index: TextIndexCheck | None = Field(description="the full-text index against the store")
    vector_index: list[VectorCheck] = Field(description="each collection's vector file against the store")
    fix: bool = Field(description="repairs were asked for")
    repairs: list[Repair] = Field(description="what fix did (never a user's file: cache and index files only)")


class IndexReload(BaseModel):
    index: Literal["text", "vector"]
    name: str | None = Field(description="the collection (vector indexes)")
    pending: int = Field(description="documents or vectors to index again")
    retired_files: int = Field(description="index files deleted or retired (the text index deletes its old "
                                           "segments a minute later)")
    retired_bytes: int


class ReloadResult(BaseModel):
    started: list[IndexReload]
    background: bool = Field(description="the indexing goes on after this call returned")
    follow: str = Field(description="how to see it finish")


class ClearResult(BaseModel):
    cache: str
    files: int = Field(description="files deleted (or retired: the text index deletes its segments a minute later)")
    bytes: int
    rows: int | None = Field(default=None, description="artifact rows deleted (thumbnails)")
    cleared: list[str] = Field(default_factory=list, description="the in-process caches emptied (memory)")
    message: str
