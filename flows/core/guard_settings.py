"""The ``guard`` section of the settings: who the callers of a guarded server are, how often they may call, and where
their calls are recorded (reference 004; mcp_server/guard). Whether HTTP callers must authenticate at all is
``server.auth`` (``assay serve --auth``)."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from flows.env import Env
from store.access import PERMISSIONS, ROLES


class GuardSection(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    local_permissions: Annotated[list[str], Env("ASSAY_LOCAL_PERMISSIONS", sep=",")] = Field(
        default_factory=lambda: list(PERMISSIONS),
        description="permissions of the local operator: the caller under stdio, and over loopback HTTP without "
                    "auth; default: all")
    jwt_issuer: Annotated[str | None, Env("ASSAY_JWT_ISSUER")] = Field(
        None, description="accept OAuth access tokens (JWT) from this identity provider (its exact iss); none: "
                          "local API tokens only")
    jwt_audience: Annotated[list[str], Env("ASSAY_JWT_AUDIENCE", sep=",")] = Field(
        default_factory=list, description="aud values accepted in a JWT (one is required with jwt_issuer)")
    jwt_jwks_url: Annotated[str | None, Env("ASSAY_JWT_JWKS_URL")] = Field(
        None, description="the identity provider's JWKS (https; http only on loopback)")
    jwt_user_claim: str = Field("preferred_username", description="the JWT claim naming the user (else sub)")
    jwt_roles_claim: str = Field("roles", description="the JWT claim listing the caller's roles or groups")
    jwt_role_map: dict[str, str] = Field(
        default_factory=dict, description="identity-provider role -> assay role (viewer, editor, admin); a role "
                                          "named like an assay role maps to it")
    jwt_scope_prefix: str = Field("assay:", description="scopes named this prefix plus a permission grant it")
    jwt_default_role: str | None = Field(None, description="role of a valid JWT that maps to no role")
    rate_read: Annotated[int, Env("ASSAY_RATE_READ")] = Field(
        120, ge=0, description="read calls (tool calls that read, resource reads) per user per minute; 0: no limit")
    rate_write: Annotated[int, Env("ASSAY_RATE_WRITE")] = Field(
        30, ge=0, description="calls that change, run or move things per user per minute; 0: no limit")
    rate_sql: Annotated[int, Env("ASSAY_RATE_SQL")] = Field(
        10, ge=0, description="query_sql calls per user per minute; 0: no limit")
    audit: Annotated[bool, Env("ASSAY_AUDIT")] = Field(
        True, description="record every tool call, resource read and refused authentication in the audit database")
    audit_url: Annotated[str | None, Env("ASSAY_AUDIT_URL")] = Field(
        None, description="SQLAlchemy URL of the audit database; none: audit.db beside a SQLite store, else in the "
                          "data dir")
    audit_retention_days: Annotated[float, Env("ASSAY_AUDIT_RETENTION_DAYS")] = Field(
        90.0, ge=0, description="audit records older than this are deleted; 0: kept forever")
    sql_timeout: Annotated[float, Env("ASSAY_SQL_TIMEOUT")] = Field(
        10.0, gt=0, description="seconds a query_sql statement may run")

    @field_validator("local_permissions")
    @classmethod
    def _known_permissions(cls, value: list[str]) -> list[str]:
        names = [p.strip().lower() for p in value if p.strip()]
        unknown = [p for p in names if p not in PERMISSIONS]
        if unknown:
            raise ValueError(f"unknown permission(s) {', '.join(unknown)}; permissions: {', '.join(PERMISSIONS)}")
        return names

    @field_validator("jwt_role_map")
    @classmethod
    def _known_roles(cls, value: dict[str, str]) -> dict[str, str]:
        bad = {k: v for k, v in value.items() if v not in ROLES}
        if bad:
            raise ValueError(f"roles must be one of {', '.join(ROLES)}; got {bad}")
        return value

    @field_validator("jwt_default_role")
    @classmethod
    def _known_role(cls, value: str | None) -> str | None:
        if value is not None and value not in ROLES:
            raise ValueError(f"role must be one of {', '.join(ROLES)}")
        return value
