"""Local users of a guarded server and their API tokens (issue 23).

A user has a role (store.access.ROLES), the permissions granted beyond it and revoked from it, and the roots it may
reach (none: every root the server has); lists are JSON text. A token is kept only as the SHA-256 of its text (a
unique column, so a presented token is found by its hash) with the first characters of the text to tell tokens
apart; the text itself is shown once, when the token is made, and never stored.
"""

from __future__ import annotations

from sqlalchemy import Column, String, Text
from sqlmodel import Field

from store.models.columns import TableModel, cascade_fk, now


class User(TableModel, table=True):
    """A local user: its name (unique whatever its case: ``name_key`` is the name in lower case), role, grants,
    revocations and roots."""

    __tablename__ = "users"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    name_key: str = Field(sa_column=Column(Text, unique=True, nullable=False))
    role: str
    granted: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))  # JSON list
    revoked: str = Field(default="[]", sa_column=Column(Text, nullable=False, default="[]"))  # JSON list
    roots: str | None = Field(default=None, sa_column=Column(Text, nullable=True))  # JSON list; NULL: every root
    created_at: float = Field(default_factory=now)
    updated_at: float = Field(default_factory=now)


class ApiToken(TableModel, table=True):
    """An API token of a user: the SHA-256 of its text (hex), its first characters, an optional label and expiry,
    when it was last used (written at most once a minute) and when it was revoked."""

    __tablename__ = "api_tokens"

    id: int | None = Field(default=None, primary_key=True)
    user_id: int = Field(sa_column=cascade_fk("users.id"))
    token_hash: str = Field(sa_column=Column(String(64), unique=True, nullable=False))
    prefix: str = Field(index=True)
    label: str | None = Field(default=None, sa_column=Column(Text, nullable=True))
    created_at: float = Field(default_factory=now)
    expires_at: float | None = None
    last_used_at: float | None = None
    revoked_at: float | None = None
