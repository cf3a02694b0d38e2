"""OAuth consent (the authorization server's decision page) and the connected clients.

/authorize (pgrag/http/oauth) parks a validated request and sends the browser here. The
owner signs in on this page (an API key or the admin password), sees the client's name,
redirect URI and requested scopes, and grants chosen collections read or read-write; the
grant can never exceed what the owner may read. Every POST carries the session's CSRF
token; the request id travels in the URL but only its hash is stored."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from fastapi import APIRouter, Depends, Form
from fastapi.responses import RedirectResponse, Response

from pgrag.errors import Forbidden, InvalidArgument, NotFound
from pgrag.services import connected_clients, consent, oauth
from pgrag.services.oauth import Decision, OAuthScope
from pgrag.web.core import View, html_errors, set_session, view_of
from pgrag.web.render import CSP

router = APIRouter(include_in_schema=False)
Page = Annotated[View, Depends(view_of)]
CONSENT = "/console/oauth/consent"
CLIENTS = "/console/oauth/clients"
Token = Annotated[str, Form(max_length=200)]


def _issuer(view: View) -> str:
    issuer: str | None = getattr(view.request.app.state, "oauth_issuer", None)
    if issuer is None:
        raise NotFound("OAuth is off on this server (PGRAG_OAUTH, or no authentication)")
    return issuer


@router.get(CONSENT)
@html_errors
async def consent_page(view: Page, request: str = "") -> Response:
    _issuer(view)
    asked = await oauth.pending(view.context.pool, request)
    if view.caller is None:
        return view.page("oauth_signin.html", request_id=request, client=asked.client_name)
    response = view.page(
        "oauth_consent.html",
        asked=asked,
        collections=await consent.grantable(view.context.pool, view.scope),
        may_write=OAuthScope.WRITE.value in asked.scopes,
    )
    response.headers["Content-Security-Policy"] = _csp_to(asked.redirect_uri)
    return response


def _csp_to(redirect_uri: str) -> str:
    """The console's policy, its `form-action` widened to the client's redirect URI: a
    browser applies form-action to the redirect that follows the form's POST too."""
    parts = urlsplit(redirect_uri)
    source = f"{parts.scheme}://{parts.netloc}" if parts.netloc else f"{parts.scheme}:"
    if not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*:(//[A-Za-z0-9.:\[\]-]+)?", source):
        return CSP  # nothing a policy could name safely: the redirect stays blocked
    return CSP.replace("form-action 'self'", f"form-action 'self' {source}")


@router.post(CONSENT + "/signin")
@html_errors
async def consent_sign_in(
    view: Page,
    request: Annotated[str, Form(max_length=200)],
    csrf: Token = "",
    key: Annotated[str, Form(max_length=1000)] = "",
) -> Response:
    """Sign in without leaving the flow (the console's own sign-in goes to the overview)."""
    if not view.csrf_ok(csrf):
        raise Forbidden("missing or wrong CSRF token: reload the page and try again")
    sessions = view.console.sessions
    key_id = view.sign_in(key)
    if key_id is None:
        asked = await oauth.pending(view.context.pool, request)
        return view.page(
            "oauth_signin.html", 401, request_id=request, client=asked.client_name, unknown=True
        )
    response = RedirectResponse(oauth.with_query(CONSENT, request=request), status_code=303)
    set_session(view.request, response, sessions.dump(sessions.new(key_id)))
    return response


@router.post(CONSENT)
@html_errors
async def consent_decide(
    view: Page,
    request: Annotated[str, Form(max_length=200)],
    csrf: Token = "",
    decision: Annotated[str, Form(max_length=10)] = "deny",
    access: Annotated[str, Form(max_length=10)] = "read",
    collection: Annotated[list[str] | None, Form()] = None,
) -> Response:
    caller = view.posted(csrf)
    issuer = _issuer(view)
    pool = view.context.pool
    if decision != "allow":
        return RedirectResponse(await oauth.deny(pool, request, issuer), status_code=303)
    asked = await oauth.pending(pool, request)
    scopes = [OAuthScope.READ.value]
    if access == "write":
        scopes.append(OAuthScope.WRITE.value)
    if not collection:
        raise InvalidArgument("choose the collections the client may read")
    chosen = None if "*" in collection else sorted(set(collection))
    granted = Decision(scopes, chosen)
    oauth.check_decision(asked, granted, caller.scope)
    if chosen is not None:  # enforced like a limited key: row-level security's role
        await consent.require_scoping(pool)
    back = await oauth.approve(pool, request, caller.name, granted, issuer)
    return RedirectResponse(back, status_code=303)


@router.get(CLIENTS)
@html_errors
async def clients_page(view: Page) -> Response:
    _issuer(view)
    _owner(view)
    clients = await connected_clients.connected(view.context.pool)
    return view.page("oauth_clients.html", clients=clients)


@router.post(CLIENTS + "/{grant_id}/revoke")
@html_errors
async def revoke_client(view: Page, grant_id: int, csrf: Token = "") -> Response:
    view.posted(csrf)
    _owner(view)
    await oauth.revoke(view.context.pool, grant_id)
    return RedirectResponse(CLIENTS, status_code=303)


def _owner(view: View) -> None:
    """Connected clients span every collection: the owner's page (full access) only."""
    if view.signed_in.scope is not None:
        raise Forbidden("only a sign-in with access to every collection manages OAuth clients")
