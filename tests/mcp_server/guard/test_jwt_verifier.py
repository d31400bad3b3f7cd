"""JWT access tokens checked against a JWKS: real keys (cryptography), tokens made with jwt.encode, the JWKS served
over real HTTP by a ThreadingHTTPServer on a loopback port."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm

from mcp_server.guard.jwt_verifier import (
    MAX_JWKS_BYTES,
    JwtSettings,
    JwtVerifier,
    TokenRefused,
    looks_like_jwt,
)
from store.access import ROLES

ISSUER = "https://idp.example/realms/assay"
AUDIENCE = "assay"

# made once per module: RSA generation is slow
RSA_A = rsa.generate_private_key(public_exponent=65537, key_size=2048)
RSA_B = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_P256 = ec.generate_private_key(ec.SECP256R1())
ED25519 = ed25519.Ed25519PrivateKey.generate()


def jwk(key: Any, kid: str | None, **extra: str) -> dict[str, Any]:
    """The public JWK of a private key."""
    public = key.public_key()
    if isinstance(key, rsa.RSAPrivateKey):
        data = RSAAlgorithm.to_jwk(public, as_dict=True)
    elif isinstance(key, ec.EllipticCurvePrivateKey):
        data = ECAlgorithm.to_jwk(public, as_dict=True)
    else:
        data = OKPAlgorithm.to_jwk(public, as_dict=True)
    if kid is not None:
        data["kid"] = kid
    return {**data, **extra}


def claims(**changes: Any) -> dict[str, Any]:
    """A valid access token's claims, with ``changes`` (None removes a claim)."""
    now = int(time.time())
    base: dict[str, Any] = {"iss": ISSUER, "aud": AUDIENCE, "sub": "sub-1", "preferred_username": "alice",
                            "exp": now + 300, "iat": now, "azp": "claude-desktop"}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


def token(key: Any = RSA_A, kid: str | None = "a", alg: str = "RS256", **changes: Any) -> str:
    return jwt.encode(claims(**changes), key, algorithm=alg, headers={"kid": kid} if kid is not None else None)


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class JwksServer:
    """A JWKS endpoint on 127.0.0.1: serves ``jwks`` (or ``body`` with ``status``, after ``delay`` seconds, with a
    Content-Length unless ``send_length`` is false), counts requests."""

    def __init__(self) -> None:
        self.jwks: dict[str, Any] = {"keys": [jwk(RSA_A, "a"), jwk(EC_P256, "ec"), jwk(ED25519, "ed")]}
        self.body: bytes | None = None
        self.status = 200
        self.delay = 0.0
        self.send_length = True
        self.requests = 0
        self.lock = threading.Lock()
        state = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                with state.lock:
                    state.requests += 1
                time.sleep(state.delay)
                body = state.body if state.body is not None else json.dumps(state.jwks).encode()
                self.send_response(state.status)
                self.send_header("Content-Type", "application/json")
                if state.send_length:  # otherwise the body ends when the connection closes (HTTP/1.0)
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                try:
                    self.wfile.write(body)
                except ConnectionError:  # the client stopped reading (a body over the size cap)
                    pass

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks.json"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()
        self.running = True

    def stop(self) -> None:
        if self.running:
            self.server.shutdown()
            self.server.server_close()
            self.thread.join()
            self.running = False


@pytest.fixture
def idp() -> Iterator[JwksServer]:
    server = JwksServer()
    yield server
    server.stop()


def verifier(idp: JwksServer, **settings: Any) -> JwtVerifier:
    options: dict[str, Any] = {"issuer": ISSUER, "audience": (AUDIENCE,), "jwks_url": idp.url,
                               "role_map": {"assay-operators": "admin", "staff": "editor"}, **settings}
    return JwtVerifier(JwtSettings(**options), fetch_timeout=2.0)


def refusal(v: JwtVerifier, raw: str) -> str:
    with pytest.raises(TokenRefused) as refused:
        v.verify(raw)
    return refused.value.reason


# --- valid tokens and the identity they map to ---

def test_valid_token_gives_the_identity_it_speaks_for(idp: JwksServer) -> None:
    raw = token(roles=["staff"], exp=2_000_000_000)
    identity = verifier(idp).verify(raw)
    assert (identity.user, identity.subject, identity.issuer) == ("alice", "sub-1", ISSUER)
    assert identity.role == "editor"
    assert identity.permissions == ROLES["editor"]
    assert identity.expires_at == 2_000_000_000
    assert identity.client_id == "claude-desktop"


def test_user_falls_back_to_sub_without_preferred_username(idp: JwksServer) -> None:
    assert verifier(idp).verify(token(preferred_username=None)).user == "sub-1"


def test_client_id_claim_names_the_client_when_there_is_no_azp(idp: JwksServer) -> None:
    assert verifier(idp).verify(token(azp=None, client_id="cli")).client_id == "cli"


@pytest.mark.parametrize("name", ["", "   ", 42])
def test_an_empty_or_non_text_user_name_is_refused(idp: JwksServer, name: Any) -> None:
    assert refusal(verifier(idp), token(preferred_username=name)) == "no user in token"


def test_a_user_name_with_control_characters_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(preferred_username="alice\nadmin")) == "bad user name"


@pytest.mark.parametrize(("roles", "scope", "role", "permissions"), [
    (["viewer"], None, "viewer", ROLES["viewer"]),
    (["Editor"], None, "editor", ROLES["editor"]),  # by name, case aside
    ("staff other", None, "editor", ROLES["editor"]),  # space-separated string, through role_map
    (["viewer", "assay-operators", "staff"], None, "admin", ROLES["admin"]),  # the highest role wins
    (["viewer"], "openid assay:run", "viewer", ROLES["viewer"] | {"run"}),
    (None, "assay:run assay:nonsense read", None, frozenset({"run"})),  # unprefixed and unknown scopes grant nothing
    (["unknown-group"], ["assay:read", "assay:mcp_access"], None, frozenset({"read", "mcp_access"})),  # list scope
])
def test_roles_and_scopes_map_to_a_role_and_permissions(idp: JwksServer, roles: Any, scope: Any, role: str | None,
                                                       permissions: frozenset[str]) -> None:
    identity = verifier(idp).verify(token(roles=roles, scope=scope))
    assert (identity.role, identity.permissions) == (role, permissions)


def test_with_an_empty_scope_prefix_bare_scopes_grant_permissions(idp: JwksServer) -> None:
    identity = verifier(idp, scope_prefix="").verify(token(scope="openid read change"))
    assert identity.permissions == frozenset({"read", "change"})


def test_a_token_that_maps_to_no_role_gets_the_default_role(idp: JwksServer) -> None:
    identity = verifier(idp, default_role="viewer").verify(token(roles=["unknown-group"]))
    assert (identity.role, identity.permissions) == ("viewer", ROLES["viewer"])


def test_roles_may_sit_in_a_nested_claim(idp: JwksServer) -> None:
    raw = token(realm_access={"roles": ["offline_access", "admin"]})
    assert verifier(idp, roles_claim="realm_access.roles").verify(raw).role == "admin"


@pytest.mark.parametrize(("key", "kid", "alg"), [(EC_P256, "ec", "ES256"), (ED25519, "ed", "EdDSA")])
def test_ec_and_eddsa_tokens_are_accepted(idp: JwksServer, key: Any, kid: str, alg: str) -> None:
    assert verifier(idp).verify(token(key, kid, alg)).user == "alice"


# --- time, audience, issuer, required claims ---

def test_expired_token_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(exp=int(time.time()) - 120)) == "expired"


def test_token_expired_within_the_leeway_is_accepted(idp: JwksServer) -> None:
    assert verifier(idp, leeway=60).verify(token(exp=int(time.time()) - 10)).user == "alice"


def test_token_not_valid_before_a_future_time_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(nbf=int(time.time()) + 600)) == "not yet valid"


def test_token_for_another_audience_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(aud="another-api")) == "wrong audience"


def test_token_whose_audience_list_contains_ours_is_accepted(idp: JwksServer) -> None:
    assert verifier(idp).verify(token(aud=["account", AUDIENCE])).user == "alice"


def test_token_from_another_issuer_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(iss="https://evil.example")) == "wrong issuer"


@pytest.mark.parametrize("claim", ["exp", "iss", "aud", "sub"])
def test_token_without_a_required_claim_is_refused(idp: JwksServer, claim: str) -> None:
    assert refusal(verifier(idp), token(**{claim: None})) == f"missing claim {claim}"


# --- signatures, keys and algorithms ---

def test_token_signed_by_another_key_under_a_known_kid_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(RSA_B, "a")) == "bad signature"


def test_token_whose_alg_does_not_fit_the_key_type_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(EC_P256, "a", "ES256")) == "signing key does not fit algorithm"


def test_token_whose_alg_differs_from_the_alg_its_jwk_names_is_refused(idp: JwksServer) -> None:
    idp.jwks = {"keys": [jwk(RSA_A, "a", alg="RS384")]}
    v = verifier(idp)
    assert refusal(v, token()) == "signing key does not fit algorithm"
    assert v.verify(token(alg="RS384")).user == "alice"


def test_token_without_kid_uses_the_only_key_of_the_jwks(idp: JwksServer) -> None:
    idp.jwks = {"keys": [jwk(RSA_A, None)]}
    assert verifier(idp).verify(token(kid=None)).user == "alice"


def test_token_without_kid_is_refused_when_the_jwks_has_several_keys(idp: JwksServer) -> None:
    assert refusal(verifier(idp), token(kid=None)) == "unknown signing key"


def test_alg_none_is_refused(idp: JwksServer) -> None:
    raw = jwt.encode(claims(), None, algorithm="none", headers={"kid": "a"})
    assert looks_like_jwt(raw)
    assert refusal(verifier(idp), raw) == "algorithm not allowed"


def test_hs256_signed_with_the_public_key_as_secret_is_refused(idp: JwksServer) -> None:
    pem = RSA_A.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    signing_input = f"{b64(json.dumps({'alg': 'HS256', 'kid': 'a'}).encode())}.{b64(json.dumps(claims()).encode())}"
    raw = f"{signing_input}.{b64(hmac.new(pem, signing_input.encode(), hashlib.sha256).digest())}"
    assert refusal(verifier(idp), raw) == "algorithm not allowed"


def test_allowed_algorithm_outside_the_settings_is_refused(idp: JwksServer) -> None:
    assert refusal(verifier(idp, algorithms=("ES256",)), token()) == "algorithm not allowed"


NO_ALG = f"{b64(json.dumps({'typ': 'JWT'}).encode())}.{b64(b'{}')}.c2ln"
NOT_AN_OBJECT = f"{b64(b'[1]')}.{b64(b'{}')}.c2ln"


@pytest.mark.parametrize("raw", ["garbage", "a.b", "!!!.@@@.###", "", "abc.def.ghi", "a.b.c.d", NO_ALG,
                                 NOT_AN_OBJECT])
def test_what_is_not_a_jwt_is_told_apart_and_refused_without_a_fetch(idp: JwksServer, raw: str) -> None:
    assert not looks_like_jwt(raw)
    assert refusal(verifier(idp), raw) == "not a JWT"
    assert idp.requests == 0


def test_a_real_token_looks_like_a_jwt() -> None:
    assert looks_like_jwt(token())


# --- fetching the JWKS: rotation, refetch limits, outages ---

def test_a_rotated_key_is_fetched_at_once_and_accepted(idp: JwksServer) -> None:
    v = verifier(idp)
    v.verify(token())
    idp.jwks = {"keys": [jwk(RSA_A, "a"), jwk(RSA_B, "b")]}
    assert v.verify(token(RSA_B, "b")).user == "alice"
    assert idp.requests == 2


def test_an_unknown_kid_refetches_at_most_once_per_interval(idp: JwksServer) -> None:
    v = verifier(idp, refetch_interval=3600)
    v.verify(token())
    assert refusal(v, token(RSA_B, "b")) == "unknown signing key"
    assert refusal(v, token(RSA_B, "b")) == "unknown signing key"
    assert idp.requests == 2


def test_the_jwks_is_cached(idp: JwksServer) -> None:
    v = verifier(idp)
    for _ in range(3):
        v.verify(token())
    assert idp.requests == 1


def test_concurrent_verifications_share_one_fetch(idp: JwksServer) -> None:
    idp.delay = 0.3  # the fetch is still under way when the other threads need the keys
    v = verifier(idp)
    start = threading.Barrier(8)
    users: list[str] = []

    def check() -> None:
        start.wait()
        users.append(v.verify(token()).user)

    threads = [threading.Thread(target=check) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert users == ["alice"] * 8
    assert idp.requests == 1


def test_a_cached_jwks_is_used_while_the_identity_provider_is_down(idp: JwksServer) -> None:
    v = verifier(idp, cache_seconds=0)  # every verification tries to refresh the keys
    v.verify(token())
    idp.stop()
    assert v.verify(token()).user == "alice"


def test_no_cached_jwks_and_the_identity_provider_down_is_refused(idp: JwksServer) -> None:
    idp.stop()
    assert refusal(verifier(idp), token()) == "identity provider unreachable"


@pytest.mark.parametrize(("status", "body", "send_length"), [
    (500, b"oops", True),
    (200, b"not json", True),
    (200, b'{"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "a"}]}', True),  # no asymmetric key: nothing usable
    (200, b" " * (MAX_JWKS_BYTES + 1), True),  # refused by its Content-Length
    (200, b" " * (MAX_JWKS_BYTES + 1), False),  # refused while reading
])
def test_an_unusable_jwks_response_is_refused_and_not_retried_at_once(idp: JwksServer, status: int, body: bytes,
                                                                      send_length: bool) -> None:
    idp.status, idp.body, idp.send_length = status, body, send_length
    v = verifier(idp)
    assert refusal(v, token()) == "identity provider unreachable"
    assert refusal(v, token()) == "identity provider unreachable"
    assert idp.requests == 1


# --- settings ---

@pytest.mark.parametrize("url", ["http://idp.example/jwks.json", "http://10.0.0.1/jwks.json"])
def test_http_jwks_url_on_a_non_loopback_host_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="http:// on a host that is not loopback"):
        JwtSettings(issuer=ISSUER, audience=(AUDIENCE,), jwks_url=url)


@pytest.mark.parametrize("url", ["https://idp.example/jwks.json", "http://localhost:8080/jwks",
                                 "http://[::1]:8080/jwks", "http://127.0.0.1/jwks"])
def test_https_and_loopback_http_jwks_urls_are_accepted(url: str) -> None:
    assert JwtSettings(issuer=ISSUER, audience=(AUDIENCE,), jwks_url=url).jwks_url == url


@pytest.mark.parametrize(("changes", "message"), [
    ({"jwks_url": "file:///etc/jwks.json"}, "not an https:// URL"),
    ({"algorithms": ("RS256", "HS256")}, "'HS256' is not allowed"),
    ({"algorithms": ("none",)}, "'none' is not allowed"),
    ({"role_map": {"staff": "superuser"}}, "unknown role 'superuser'"),
    ({"default_role": "root"}, "unknown role 'root'"),
    ({"audience": ()}, "audience is empty"),
])
def test_invalid_settings_are_refused_when_made(changes: dict[str, Any], message: str) -> None:
    options: dict[str, Any] = {"issuer": ISSUER, "audience": (AUDIENCE,), "jwks_url": "https://idp.example/jwks",
                               **changes}
    with pytest.raises(ValueError, match=message):
        JwtSettings(**options)
