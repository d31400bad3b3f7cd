"""OAuth access tokens (JWTs) issued by an external identity provider, checked against its JWKS, issuer and audience,
with claims mapped to an assay user, role and permissions (issue 23).

The guarded server accepts two kinds of bearer token: local API tokens and these. :func:`looks_like_jwt` tells them
apart cheaply; :class:`JwtVerifier` does the checking. What a token must carry: a signature by a key of the identity
provider's JWKS (the key named by the header's ``kid``; with no ``kid``, the JWKS's only key), made with an
asymmetric algorithm of :attr:`JwtSettings.algorithms` (``none`` and the HMAC ones never: their "key" would be public
data, the algorithm-confusion attack) by a key whose type and curve fit it; ``exp`` (with ``leeway`` of clock skew,
as for ``nbf`` and ``iat``), ``iss`` equal to the issuer, ``aud`` containing one of the audiences, and ``sub`` (RFC
9068 requires it of access tokens). A refusal is a :class:`TokenRefused` whose ``reason`` is a short phrase safe to
log and audit, never the token.

The JWKS is fetched with urllib (PyJWT's ``PyJWKClient`` does not cap the response's size, drops a cached set when
a refresh fails, skips keys without ``kid`` and counts the first fetch as a refetch, so a rotated key waits):
with a timeout, at most :data:`MAX_JWKS_BYTES`, no redirects. It is kept ``cache_seconds``; a ``kid`` it does not
hold refetches at once (key rotation), at most once per ``refetch_interval``. One fetch at a time: verifications
that need the keys meanwhile wait for it and use what it got. An identity provider that cannot be reached leaves the
cached keys in use; with none cached the token is refused ("identity provider unreachable"), and the next attempt
waits ``refetch_interval`` so a dead endpoint does not make every request wait for its timeout.
"""

from __future__ import annotations

import binascii
import ipaddress
import json
import logging
import threading
import time
import urllib.request
from base64 import urlsafe_b64decode
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException, HTTPResponse
from types import MappingProxyType
from typing import Any
from urllib.error import HTTPError, URLError
from urllib.parse import urlparse

import jwt
from jwt.exceptions import InvalidSubjectError

from store.access import ROLES, effective_permissions

log = logging.getLogger(__name__)

MAX_JWKS_BYTES = 1024 * 1024
MAX_TOKEN_CHARS = 64 * 1024  # far above what identity providers issue (a few KB with many groups)

# algorithm -> (kty, the curves it accepts; empty: no curve); HMAC and none are absent on purpose
KEY_TYPES: MappingProxyType[str, tuple[str, frozenset[str]]] = MappingProxyType({
    **{alg: ("RSA", frozenset()) for alg in ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512")},
    "ES256": ("EC", frozenset({"P-256"})),
    "ES384": ("EC", frozenset({"P-384"})),
    "ES512": ("EC", frozenset({"P-521"})),
    "ES256K": ("EC", frozenset({"secp256k1"})),
    "EdDSA": ("OKP", frozenset({"Ed25519", "Ed448"})),
})

ROLE_RANK: MappingProxyType[str, int] = MappingProxyType({"viewer": 1, "editor": 2, "admin": 3})
_BASE64URL = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class TokenRefused(Exception):
    """A token that does not admit its bearer; ``reason`` is a short phrase for the log and the audit record."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _JwksUnavailable(Exception):
    """The JWKS could not be fetched or used (the detail is logged, the caller sees "identity provider
    unreachable")."""


@dataclass(frozen=True)
class JwtSettings:
    """Which identity provider's tokens are accepted and how their claims map to assay's users and permissions.

    ``roles_claim`` and ``user_claim`` may be dotted paths into nested claims (Keycloak's ``realm_access.roles``)
    when no claim has the dotted name itself. A scope grants a permission only when it carries ``scope_prefix``
    (``assay:run`` grants ``run``; a bare ``read`` scope is the identity provider's business), unless the prefix
    is empty. Invalid settings raise ValueError when made.
    """

    issuer: str
    audience: tuple[str, ...]
    jwks_url: str
    algorithms: tuple[str, ...] = ("RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA")
    leeway: float = 30.0
    user_claim: str = "preferred_username"
    roles_claim: str = "roles"
    role_map: Mapping[str, str] = field(default_factory=dict)
    permissions_claim: str = "scope"
    scope_prefix: str = "assay:"
    default_role: str | None = None
    cache_seconds: float = 300.0
    refetch_interval: float = 30.0

    def __post_init__(self) -> None:
        if not self.issuer:
            raise ValueError("JWT issuer is empty: give the identity provider's issuer URL (the tokens' `iss`)")
        audience = (self.audience,) if isinstance(self.audience, str) else tuple(self.audience)
        if not audience or not all(isinstance(a, str) and a for a in audience):
            raise ValueError("JWT audience is empty: give the audience(s) the tokens carry in `aud`")
        object.__setattr__(self, "audience", audience)
        check_jwks_url(self.jwks_url)
        object.__setattr__(self, "algorithms", tuple(self.algorithms))
        for alg in self.algorithms:
            if alg not in KEY_TYPES:
                raise ValueError(f"JWT algorithm {alg!r} is not allowed; allowed: {', '.join(KEY_TYPES)} "
                                 "(never none or HS*: an identity provider's keys are public)")
        if not self.algorithms:
            raise ValueError(f"no JWT algorithms given; allowed: {', '.join(KEY_TYPES)}")
        roles = {}
        for idp_role, role in self.role_map.items():
            roles[idp_role] = _assay_role(role, f"role_map[{idp_role!r}]")
        object.__setattr__(self, "role_map", MappingProxyType(roles))
        if self.default_role is not None:
            object.__setattr__(self, "default_role", _assay_role(self.default_role, "default_role"))
        for name in ("leeway", "cache_seconds", "refetch_interval"):
            if getattr(self, name) < 0:
                raise ValueError(f"JWT {name} is negative")


@dataclass(frozen=True)
class TokenIdentity:
    """Who a verified token speaks for, and what assay lets them do."""

    user: str
    subject: str
    issuer: str
    role: str | None  # the highest assay role the token maps to (admin > editor > viewer)
    permissions: frozenset[str]  # the role's permissions plus the granted scopes
    expires_at: int | None
    client_id: str | None  # `azp` or `client_id`


def check_jwks_url(url: str) -> str:
    """``url`` if it is an https URL, or an http one on a loopback host (a test's or a local proxy's); ValueError
    otherwise (keys fetched in the clear could be swapped by anyone on the path)."""
    parts = urlparse(url)
    if parts.scheme not in ("https", "http"):
        raise ValueError(f"JWKS URL {url!r} is not an https:// URL")
    if not parts.hostname:
        raise ValueError(f"JWKS URL {url!r} names no host")
    if parts.scheme == "http" and not _is_loopback(parts.hostname):
        raise ValueError(f"JWKS URL {url!r} uses http:// on a host that is not loopback; use https:// (http:// is "
                         "accepted only for 127.0.0.1, ::1 and localhost)")
    return url


def looks_like_jwt(token: str) -> bool:
    """Whether ``token`` has a JWT's shape: three base64url parts (the last may be empty) whose first is a JSON
    object naming an ``alg``. Cheap and unverified: it only chooses between local tokens and JWTs."""
    return _unverified_header(token) is not None


class JwtVerifier:
    """Verifies access tokens of one identity provider (:class:`JwtSettings`); thread-safe, blocking (the JWKS is
    fetched over the network when needed)."""

    def __init__(self, settings: JwtSettings, *, fetch_timeout: float = 5.0) -> None:
        if fetch_timeout <= 0:
            raise ValueError("JWKS fetch_timeout must be positive")
        self.settings = settings
        self.fetch_timeout = fetch_timeout
        proxies: dict[str, str] | None = {} if _is_loopback(urlparse(settings.jwks_url).hostname or "") else None
        self._opener = urllib.request.build_opener(_NoRedirects(), urllib.request.ProxyHandler(proxies))
        self._lock = threading.Lock()  # guards the fields below
        self._fetch_lock = threading.Lock()  # one fetch at a time; waiters use its result
        self._keys: _KeySet | None = None
        self._last_refetch: float | None = None  # when an unknown kid last caused a fetch
        self._last_failure: float | None = None

    def verify(self, token: str) -> TokenIdentity:
        """The identity ``token`` speaks for; TokenRefused with the reason otherwise."""
        header = _unverified_header(token)
        if header is None:
            raise TokenRefused("not a JWT")
        alg = header["alg"]
        if alg not in self.settings.algorithms:
            raise TokenRefused("algorithm not allowed")
        kid = header.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise TokenRefused("not a JWT")
        key = self._signing_key(kid, alg)
        try:
            claims = jwt.decode(
                token, key, algorithms=[alg], audience=list(self.settings.audience), issuer=self.settings.issuer,
                leeway=self.settings.leeway,
                options={"require": ["exp", "iss", "aud", "sub"], "enforce_minimum_key_length": True},
            )
        except jwt.PyJWTError as error:
            raise TokenRefused(_reason(error)) from None
        return self._identity(claims)

    def _identity(self, claims: dict[str, Any]) -> TokenIdentity:
        """The claims of a verified token mapped to a user, a role and permissions."""
        s = self.settings
        subject = claims["sub"]
        name = _claim(claims, s.user_claim)
        user = subject if name is None else name
        if not isinstance(user, str) or not user.strip():
            raise TokenRefused("no user in token")
        if len(user) > 255 or any(ord(c) < 32 or ord(c) == 127 for c in user):
            raise TokenRefused("bad user name")
        roles = [r for r in (self._assay_role(idp) for idp in _names(_claim(claims, s.roles_claim))) if r]
        role = max(roles, key=ROLE_RANK.__getitem__) if roles else s.default_role
        granted = set()
        for scope in _names(_claim(claims, s.permissions_claim)):
            if scope.startswith(s.scope_prefix):
                granted.add(scope[len(s.scope_prefix):])
        client = claims.get("azp", claims.get("client_id"))
        return TokenIdentity(
            user=user, subject=subject, issuer=claims["iss"], role=role,
            permissions=effective_permissions(role, granted), expires_at=int(claims["exp"]),
            client_id=client if isinstance(client, str) else None,
        )

    def _assay_role(self, idp_role: str) -> str | None:
        """The assay role an identity provider's role maps to: through role_map, else by its name."""
        mapped = self.settings.role_map.get(idp_role)
        if mapped is not None:
            return mapped
        name = idp_role.lower()
        return name if name in ROLES else None

    def _signing_key(self, kid: str | None, alg: str) -> jwt.PyJWK:
        """The JWKS key for ``kid`` (no kid: the only key) made for ``alg``; refetches the JWKS when it is stale or
        lacks ``kid`` (unless it was fetched after this call began)."""
        began = time.monotonic()
        with self._lock:
            keys = self._keys
        if keys is None or began - keys.fetched_at >= self.settings.cache_seconds:
            keys = self._refresh(keys, stale_ok=True)
        if kid is not None and kid not in keys.by_kid and keys.fetched_at < began:
            keys = self._refresh(keys, stale_ok=False, unknown_kid=True)
        candidates = keys.for_kid(kid)
        if not candidates:
            raise TokenRefused("unknown signing key")
        for key in candidates:
            if key.algorithm_name == alg:
                return key
        raise TokenRefused("signing key does not fit algorithm")

    def _refresh(self, seen: _KeySet | None, *, stale_ok: bool, unknown_kid: bool = False) -> _KeySet:
        """A fresh JWKS, or the one a fetch that finished while we waited got (``seen`` is what the caller had).
        A failed fetch gives the cached JWKS when ``stale_ok`` and there is one, and TokenRefused otherwise; an
        unknown kid within ``refetch_interval`` of the last one gives the cached JWKS without fetching, as does
        any fetch within ``refetch_interval`` of a failed one."""
        interval = self.settings.refetch_interval
        with self._fetch_lock:
            with self._lock:
                cached, now = self._keys, time.monotonic()
                if cached is not None and cached is not seen:
                    return cached
                if unknown_kid and cached is not None:
                    if self._last_refetch is not None and now - self._last_refetch < interval:
                        return cached
                    self._last_refetch = now
                recently_failed = self._last_failure is not None and now - self._last_failure < interval
            if recently_failed:
                return self._unavailable(cached, stale_ok)
            try:
                keys = _KeySet.parse(self._download(), self.settings.algorithms)
            except _JwksUnavailable as error:
                log.warning("JWKS %s: %s", self.settings.jwks_url, error)
                with self._lock:
                    self._last_failure = time.monotonic()
                return self._unavailable(cached, stale_ok)
            with self._lock:
                self._keys, self._last_failure = keys, None
            return keys

    @staticmethod
    def _unavailable(cached: _KeySet | None, stale_ok: bool) -> _KeySet:
        if cached is not None and stale_ok:
            return cached
        raise TokenRefused("identity provider unreachable")

    def _download(self) -> bytes:
        """The JWKS document's bytes: _JwksUnavailable on any network or HTTP failure, a redirect, more than
        MAX_JWKS_BYTES, or the timeout passing (for the whole download, not only each read)."""
        deadline = time.monotonic() + self.fetch_timeout
        request = urllib.request.Request(self.settings.jwks_url, headers={"Accept": "application/json"})
        try:
            response: HTTPResponse
            with self._opener.open(request, timeout=self.fetch_timeout) as response:
                if response.status != 200:
                    raise _JwksUnavailable(f"HTTP {response.status}")
                length = response.headers.get("Content-Length")
                if length is not None and length.isdigit() and int(length) > MAX_JWKS_BYTES:
                    raise _JwksUnavailable(f"response of {length} bytes exceeds {MAX_JWKS_BYTES}")
                chunks, size = [], 0
                while chunk := response.read1(65536):
                    size += len(chunk)
                    if size > MAX_JWKS_BYTES:
                        raise _JwksUnavailable(f"response exceeds {MAX_JWKS_BYTES} bytes")
                    if time.monotonic() > deadline:
                        raise _JwksUnavailable(f"download took over {self.fetch_timeout} s")
                    chunks.append(chunk)
        except (URLError, HTTPException, OSError) as error:
            if isinstance(error, HTTPError):
                error.close()
            raise _JwksUnavailable(str(getattr(error, "reason", error))) from error
        return b"".join(chunks)


@dataclass(frozen=True)
class _KeySet:
    """One fetched JWKS: each signing key made once for every allowed algorithm it fits."""

    by_kid: Mapping[str | None, tuple[jwt.PyJWK, ...]]
    only: tuple[jwt.PyJWK, ...] | None  # the keys of the JWKS's single signing key, for tokens without kid
    fetched_at: float

    def for_kid(self, kid: str | None) -> tuple[jwt.PyJWK, ...]:
        if kid is None:
            return self.only or ()
        return self.by_kid.get(kid, ())

    @classmethod
    def parse(cls, body: bytes, algorithms: Iterable[str]) -> _KeySet:
        """The usable keys of a JWKS document; _JwksUnavailable if it is not one or holds none."""
        try:
            document = json.loads(body)
        except (ValueError, RecursionError) as error:
            raise _JwksUnavailable(f"not JSON: {error}") from None
        raw = document.get("keys") if isinstance(document, dict) else None
        if not isinstance(raw, list):
            raise _JwksUnavailable("not a JWKS (no list of keys)")
        allowed = tuple(algorithms)
        by_kid: dict[str | None, tuple[jwt.PyJWK, ...]] = {}
        per_key: list[tuple[jwt.PyJWK, ...]] = []
        for jwk in raw:
            made = _keys_of(jwk, allowed)
            if made:
                kid = jwk.get("kid")
                by_kid[kid] = by_kid.get(kid, ()) + made
                per_key.append(made)
        if not per_key:
            raise _JwksUnavailable("no usable signing key (asymmetric, for an allowed algorithm)")
        return cls(by_kid=by_kid, only=per_key[0] if len(per_key) == 1 else None, fetched_at=time.monotonic())


def _keys_of(jwk: Any, algorithms: tuple[str, ...]) -> tuple[jwt.PyJWK, ...]:
    """One JWK made for each allowed algorithm its type and curve fit (and its own ``alg``, if it names one);
    nothing for a key that is not for signatures or cannot be read."""
    if not isinstance(jwk, dict) or jwk.get("use", "sig") != "sig" or not isinstance(jwk.get("kid", ""), str):
        return ()
    ops = jwk.get("key_ops")
    if ops is not None and (not isinstance(ops, list) or "verify" not in ops):
        return ()
    made = []
    for alg in algorithms:
        kty, curves = KEY_TYPES[alg]
        if jwk.get("kty") != kty or (curves and jwk.get("crv") not in curves) or jwk.get("alg", alg) != alg:
            continue
        try:
            made.append(jwt.PyJWK(jwk, algorithm=alg))
        except jwt.PyJWTError:
            continue
    return tuple(made)


def _unverified_header(token: str) -> dict[str, Any] | None:
    """The JOSE header of a token shaped like a JWT (see looks_like_jwt), or None."""
    if not isinstance(token, str) or len(token) > MAX_TOKEN_CHARS:
        return None
    parts = token.split(".")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        return None
    if any(not set(part) <= _BASE64URL or len(part) % 4 == 1 for part in parts):
        return None
    try:
        header = json.loads(urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except (binascii.Error, ValueError, RecursionError):
        return None
    if not isinstance(header, dict) or not isinstance(header.get("alg"), str):
        return None
    return header


def _claim(claims: Mapping[str, Any], name: str) -> Any:
    """A claim by name, or by a dotted path into nested objects when no claim has the dotted name; None if
    absent."""
    if name in claims:
        return claims[name]
    value: Any = claims
    for part in name.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _names(value: Any) -> list[str]:
    """A claim holding names: a list of strings or a space-separated string (others ignored)."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str)]
    return []


def _reason(error: jwt.PyJWTError) -> str:
    """The short phrase for a PyJWT refusal."""
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"missing claim {error.claim}"
    reasons: tuple[tuple[type[jwt.PyJWTError], str], ...] = (
        (jwt.ExpiredSignatureError, "expired"),
        (jwt.ImmatureSignatureError, "not yet valid"),
        (jwt.InvalidAudienceError, "wrong audience"),
        (jwt.InvalidIssuerError, "wrong issuer"),
        (jwt.InvalidSignatureError, "bad signature"),
        (jwt.InvalidAlgorithmError, "algorithm not allowed"),
        (jwt.InvalidKeyError, "bad signing key"),
        (jwt.InvalidIssuedAtError, "bad claim iat"),
        (InvalidSubjectError, "bad claim sub"),
        (jwt.DecodeError, "malformed token"),
    )
    for kind, reason in reasons:
        if isinstance(error, kind):
            return reason
    return "invalid token"


def _assay_role(role: str, what: str) -> str:
    name = role.strip().lower() if isinstance(role, str) else role
    if name not in ROLES:
        raise ValueError(f"JWT {what}: unknown role {role!r}; roles: {', '.join(ROLES)}")
    return name


def _is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """Refuses redirects: the JWKS URL is configured, and following one could leave https."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None
