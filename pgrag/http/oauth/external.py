"""An external authorization server (Keycloak, Auth0, Entra ID…) instead of pgrag's own:
its JWT access tokens are verified here (signature by its JWKS, `iss`, `aud` = this
server's public URL, `exp`), the collections they may read come from one claim
(PGRAG_OAUTH_COLLECTIONS_CLAIM: a list or a space-separated string, `*` for every
collection; absent, the token is refused) and the scopes from `scope` or `scp`."""

from __future__ import annotations

import json
import logging
from typing import Any

import anyio
import jwt

from pgrag.config.oauth import OAuthSettings
from pgrag.http.oauth.gate import OAuthGate, Principal
from pgrag.services.caller_names import keyed

log = logging.getLogger(__name__)
ALGORITHMS = ["RS256", "RS384", "RS512", "PS256", "ES256", "ES384", "EdDSA"]


def _words(value: Any) -> list[str] | None:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    return None


class ExternalIssuer(OAuthGate):
    def __init__(self, settings: OAuthSettings, base: str) -> None:
        assert settings.oauth_issuer is not None
        super().__init__(base, settings.oauth_issuer)
        jwks_url = settings.oauth_jwks_url or settings.oauth_issuer + "/.well-known/jwks.json"
        self.keys = jwt.PyJWKClient(jwks_url, timeout=5)
        self.claim = settings.oauth_collections_claim

    def _claims(self, token: str) -> dict[str, Any] | None:
        try:
            key = self.keys.get_signing_key_from_jwt(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=ALGORITHMS,
                audience=[self.resource, self.resource + "/", self.resource + "/mcp"],
                issuer=self.issuer,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.PyJWTError as exc:  # an invalid token is the client's problem: one line
            log.info("external OAuth token refused: %s", type(exc).__name__)
            return None
        return claims

    async def verify(self, token: str) -> Principal | None:
        claims = await anyio.to_thread.run_sync(self._claims, token)  # JWKS fetch blocks
        if claims is None:
            return None
        collections = _words(claims.get(self.claim))
        if collections is None:
            return None
        scopes = _words(claims.get("scope")) or _words(claims.get("scp")) or []
        # the whole identity, keyed: a subject through two clients is two callers
        who = [claims.get("sub"), claims.get("client_id") or claims.get("azp")]
        caller = keyed("oauth", json.dumps(who, default=str))
        return Principal(caller, None if "*" in collections else collections, scopes)
