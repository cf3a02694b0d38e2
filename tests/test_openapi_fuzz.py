"""Schemathesis over the REST API's own OpenAPI description.

Every REST operation that `/openapi.json` describes is fuzzed over real HTTP against a real
`pgrag serve --transport http`: positive and negative inputs that schemathesis derives from
the description, plus (for `{document_id}` routes) references to documents that exist. For
every response: no 5xx but 503 (a down database), the status code documented, the content
type and body conforming to the described response, negative inputs rejected, and every
4xx/5xx body the stable error shape of SPEC §6 with a stable code.

- the shared knowledge base (tests/support/kb_server.py, real embedding model, read-only
  server, full-access key): every GET route;
- a writable server on a throw-away database (hash/384, `write` toolset, not read-only,
  one API key): every route, uploads and deletions included;
- the same writable server without a key or with a wrong one: 401 with the stable body on
  every route but /healthz;
- upload file names and collections (hostile ones included): 202 or 400, never a file
  outside the server's upload folder, a `status_url` that names the upload.

Inputs: the hypothesis profile of tests/conftest.py (`HYPOTHESIS_PROFILE`, default `ci`)
gives each test `max_examples` inputs per operation. Counting only the operations that take
parameters (healthz, readyz and metrics have a single input each): shared KB 5 + writable 7
+ missing/wrong key 10 (the key varies on every route) + upload names 1 = 23 properties;
`nightly` (2500) generates 23 x 2500 = 57,500 inputs, `ci` (40) 23 x 40 = 920.

schemathesis' pytest integration (`schemathesis.pytest.from_fixture`) does not run under
pytest 9.2 (it writes `Node._nodeid`), so each operation runs as a plain hypothesis test over
`APIOperation.as_strategy()` with `Case.call_and_validate()`.
"""

from __future__ import annotations

import re
import string
import subprocess
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
import schemathesis
from hypothesis import given, settings
from hypothesis import strategies as st
from schemathesis import GenerationMode
from schemathesis.checks import (
    content_type_conformance,
    negative_data_rejection,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from pgrag.errors import ErrorCode
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import (
    FULL_KEY,
    HASH_MODEL,
    HttpServer,
    KnowledgeBase,
    child_env,
    http_server,
)

pytest_plugins = ("tests.support.kb_server",)


# the stable codes of pgrag.errors, plus the REST layer's own 401 (pgrag/http/auth.py)
STABLE_CODES = {str(c) for c in ErrorCode} | {"UNAUTHORIZED"}
AUTH = {"Authorization": f"Bearer {FULL_KEY}"}
READ_OPERATIONS = [
    "GET /healthz",
    "GET /readyz",
    "GET /metrics",
    "GET /api/search",
    "GET /api/documents",
    "GET /api/documents/{document_id}",
    "GET /api/documents/{document_id}/content",
    "GET /api/status",
]
WRITE_OPERATIONS = ["POST /api/documents", "DELETE /api/documents/{document_id}"]
OPERATIONS = READ_OPERATIONS + WRITE_OPERATIONS


def stable_error_body(ctx: Any, response: Any, case: Any) -> bool | None:
    """SPEC §6: no 5xx but 503; every error body `{isError, errorCode, errorMessage,
    errorDetails}` with a stable code (202 PROCESSING carries it too)."""
    status = response.status_code
    assert status < 500 or status == 503, f"HTTP {status}: {response.text[:500]}"
    if status < 400 and not (status == 202 and case.operation.method.upper() == "GET"):
        return None
    body = response.json()
    assert isinstance(body, dict) and body.get("isError") is True, body
    assert body.get("errorCode") in STABLE_CODES, body
    assert isinstance(body.get("errorMessage"), str) and body["errorMessage"], body
    assert isinstance(body.get("errorDetails"), dict), body
    return None


def upload_status_url(ctx: Any, response: Any, case: Any) -> bool | None:
    """An accepted upload's `status_url` names the uploaded document."""
    if case.operation.method.upper() == "POST" and response.status_code == 202:
        body = response.json()
        url = urllib.parse.urlsplit(body["status_url"])
        assert url.path == "/api/status", body
        assert urllib.parse.parse_qs(url.query) == {"document": [body["path"]]}, body
    return None


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    stable_error_body,
    upload_status_url,
]
# multipart sends every part as text or bytes: a "number" file or an "object" collection is
# a valid upload on the wire, so schema-negative multipart bodies are not invalid requests
MULTIPART_CHECKS = [c for c in CHECKS if c is not negative_data_rejection]


# SPEC: 503 (database down, with Retry-After) is the one 5xx a client may see
CONFIG = {"checks": {"not_a_server_error": {"expected-statuses": ["2xx", "3xx", "4xx", "503"]}}}


def load_schema(server: HttpServer) -> Any:
    schema = schemathesis.openapi.from_url(
        server.base + "/openapi.json",
        config=schemathesis.Config.from_dict(CONFIG),
        headers=AUTH,
    )
    schema.config.update(base_url=server.base)
    return schema


def cases(schema: Any, label: str, refs: list[str]) -> st.SearchStrategy[Any]:
    """Positive and negative cases of one operation; `{document_id}` also from `refs`."""
    method, path = label.split(" ", 1)
    op = schema[path][method]
    if not op.path_parameters and not op.query and not len(op.body):
        return op.as_strategy()  # type: ignore[no-any-return]
    options = [op.as_strategy(GenerationMode.POSITIVE), op.as_strategy(GenerationMode.NEGATIVE)]
    if "{document_id}" in path:
        options.append(
            st.sampled_from(refs).flatmap(
                lambda ref: op.as_strategy(path_parameters={"document_id": ref})
            )
        )
    return st.one_of(options)


NO_PARAMETERS = {"GET /healthz", "GET /readyz", "GET /metrics"}


def fuzz(strategy: st.SearchStrategy[Any], call: Callable[[Any], None], *, inputs: int) -> None:
    """A hypothesis test under the active profile; it must have sent `inputs` requests."""
    sent = 0

    def counted(value: Any) -> None:
        nonlocal sent
        sent += 1
        call(value)

    given(strategy)(counted)()
    assert sent >= inputs, f"only {sent} inputs, expected {inputs}"


def examples(label: str) -> int:
    """`max_examples` of the active profile, or 1 for a route without parameters."""
    return 1 if label in NO_PARAMETERS else settings.default.max_examples


def validated(session: requests.Session) -> Callable[[Any], None]:
    """Send a case with the full-access key; schemathesis' checks and ours on the answer."""

    def call(case: Any) -> None:
        multipart = case.media_type == "multipart/form-data"
        checks = MULTIPART_CHECKS if multipart else CHECKS
        case.call_and_validate(session=session, headers=AUTH, checks=checks)

    return call


def test_every_described_operation_is_fuzzed(kb_schema: Any) -> None:
    described = {op.ok().label for op in kb_schema.get_all_operations()}
    assert described == set(OPERATIONS)


def test_the_description_documents_the_error_responses(kb_http: HttpServer) -> None:
    """Regression: only 200 and a 422 the server never sends were described, so every
    400/401/403/404/409/503 was an undocumented status with an undescribed body."""
    spec = requests.get(kb_http.base + "/openapi.json", headers=AUTH, timeout=30).json()
    error_ref = {"$ref": "#/components/schemas/ErrorBody"}
    for label in OPERATIONS:
        method, path = label.split(" ", 1)
        responses = spec["paths"][path][method.lower()]["responses"]
        assert "422" not in responses, label
        if path.startswith("/api/"):
            for status in ("400", "401", "503"):
                assert responses[status]["content"]["application/json"]["schema"] == error_ref
    content = spec["paths"]["/api/documents/{document_id}/content"]["get"]["responses"]
    assert {"200", "202", "404", "409"} <= set(content)
    assert "HTTPValidationError" not in spec["components"]["schemas"]


# ---------------------------------------------------------------- the shared knowledge base


@pytest.fixture(scope="module")
def kb_schema(kb_http: HttpServer) -> Any:
    return load_schema(kb_http)


@pytest.mark.parametrize("label", READ_OPERATIONS)
def test_read_routes_of_the_shared_knowledge_base(
    label: str, kb_schema: Any, kb: KnowledgeBase
) -> None:
    refs = sorted(kb.ids.values())[:8] + sorted(kb.ids)[:8] + ["corrupted.xlsx", "empty.txt"]
    with requests.Session() as session:
        fuzz(cases(kb_schema, label, refs), validated(session), inputs=examples(label))


# ------------------------------------------------------------------------ writable server


@dataclass(frozen=True)
class Writable:
    server: HttpServer
    home: Path  # the server's PGRAG_HOME (uploads are stored under home/uploads)


@pytest.fixture(scope="module")
def writable(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Writable]:
    """A throw-away database with three documents (one failed), served writable."""
    dsn = create_database(server_dsn)
    docs: Path = tmp_path_factory.mktemp("openapi-docs")
    (docs / "a.md").write_text("# Contracts\n\nSigned by two directors.\n", encoding="utf-8")
    (docs / "b.csv").write_text("name,amount\nwidget,10\n", encoding="utf-8")
    (docs / "broken.xlsx").write_bytes(b"not a spreadsheet")
    home: Path = tmp_path_factory.mktemp("openapi-home") / "home"
    env = {
        "PGRAG_READ_ONLY": "false",
        "PGRAG_TOOLSETS": "core,write",
        "PGRAG_HOME": str(home),
        "PGRAG_API_KEYS": FULL_KEY,
        # every wrong key the fuzzer sends comes from 127.0.0.1: a budget it cannot spend, so
        # each is answered 401 (the throttle itself: tests/test_guard.py)
        "PGRAG_AUTH_FAILURE_BURST": "1000000",
    }
    model = ("--embedding-model", HASH_MODEL)
    try:
        subprocess.run(
            [*pgrag_cmd("--database-url", dsn, *model, "ingest", "-q"), str(docs)],
            check=True,
            capture_output=True,
            timeout=120,
            env=child_env(),
        )
        with http_server(dsn, *model, env=env) as server:
            yield Writable(server, home)
    finally:
        drop_database(server_dsn, dsn)


@pytest.fixture(scope="module")
def writable_schema(writable: Writable) -> Any:
    return load_schema(writable.server)


WRITABLE_REFS = ["a.md", "b.csv", "broken.xlsx"]


@pytest.mark.parametrize("label", OPERATIONS)
def test_every_route_of_a_writable_server(label: str, writable_schema: Any) -> None:
    with requests.Session() as session:
        fuzz(
            cases(writable_schema, label, WRITABLE_REFS),
            validated(session),
            inputs=examples(label),
        )


WRONG_AUTH = st.one_of(
    st.just({}),
    st.text(st.sampled_from(string.ascii_letters + string.digits + "-_.~+/= "), max_size=40).map(
        lambda token: {"Authorization": f"Bearer {token}"}
    ),
    st.sampled_from(
        [
            {"Authorization": FULL_KEY},
            {"Authorization": f"Basic {FULL_KEY}"},
            {"Authorization": f"Bearer {FULL_KEY}x"},
            {"Authorization": f"Bearer {FULL_KEY[:-1]}"},
            {"Authorization": "Bearer"},
            {"X-Api-Key": FULL_KEY},
        ]
    ),
)


@pytest.mark.parametrize("label", OPERATIONS)
def test_a_missing_or_wrong_key_is_unauthorized(label: str, writable_schema: Any) -> None:
    strategy = st.tuples(cases(writable_schema, label, WRITABLE_REFS), WRONG_AUTH)

    def call(case_and_headers: tuple[Any, dict[str, str]]) -> None:
        case, headers = case_and_headers
        r = case.call(session=session, headers=headers)
        if label == "GET /healthz":
            assert r.status_code == 200, r.text
            return
        assert r.status_code == 401, (r.status_code, r.text)
        [challenge] = r.headers["www-authenticate"]
        assert challenge.startswith("Bearer ") and "resource_metadata=" in challenge
        body = r.json()
        assert body["isError"] is True and body["errorCode"] == "UNAUTHORIZED", body
        assert "Bearer" in body["errorMessage"] and body["errorDetails"] == {}

    with requests.Session() as session:
        fuzz(strategy, call, inputs=settings.default.max_examples)  # the key varies


def test_starlette_errors_have_the_stable_body(writable: Writable) -> None:
    """Regression (found fuzzing uploads): a malformed multipart body was answered
    `{"detail": "Invalid multipart data."}`; an unknown route or method likewise."""
    base = writable.server.base
    multipart = {**AUTH, "Content-Type": "multipart/form-data; boundary=xyz"}
    for r, status, code in (
        (
            requests.post(base + "/api/documents", headers=multipart, data=b"\x18--x"),
            400,
            "INVALID_ARGUMENT",
        ),
        (requests.get(base + "/api/documents/a/b/c", headers=AUTH), 404, "NOT_FOUND"),
        (requests.put(base + "/api/documents", headers=AUTH), 405, "INVALID_ARGUMENT"),
    ):
        assert r.status_code == status, (r.status_code, r.text)
        body = r.json()
        assert body["isError"] is True and body["errorCode"] == code, body
        assert body["errorMessage"] and body["errorDetails"] == {}, body
    # every method the path has (Starlette's own header named only the first route's)
    assert {m.strip() for m in r.headers["allow"].split(",")} >= {"GET", "POST"}


# ------------------------------------------------------------- upload names and collections

OUTSIDE = "outside-the-upload-folder"
HOSTILE_NAMES = st.one_of(
    st.sampled_from(
        [
            "../escape.txt",
            "/etc/passwd.txt",
            "a&b=c#d e+f%20.txt",
            "n" * 300 + ".txt",
            "a\x00b.txt",
            "合同 草案.md",
            "..",
            ".hidden",
            "no-extension",
        ]
    ),
    st.text(st.characters(codec="utf-8"), min_size=1, max_size=80),
)
HOSTILE_COLLECTIONS = st.one_of(
    st.sampled_from(
        ["", "default", f"../../{OUTSIDE}", f"../{OUTSIDE}", "a\x00b", "c" * 201, "新集合"]
    ),
    st.text(st.characters(codec="utf-8"), max_size=220),
)


@given(name=HOSTILE_NAMES, collection=HOSTILE_COLLECTIONS, absolute=st.booleans())
def test_upload_names_and_collections_never_leave_the_upload_folder(
    writable: Writable, name: str, collection: str, absolute: bool
) -> None:
    """Regression (found fuzzing uploads): the collection was a path under home/uploads,
    so `../..` or an absolute collection wrote the file anywhere; a NUL or a file name over
    255 bytes was a 500; `status_url` was not URL-encoded."""
    target = writable.home.parent / OUTSIDE  # where `../../outside...` used to land
    if absolute:
        collection = str(target)
    r = requests.post(
        writable.server.base + "/api/documents",
        headers=AUTH,
        files={"file": (name, b"upload probe\n", "text/plain")},
        data={"collection": collection},
        timeout=60,
    )
    assert r.status_code in (202, 400), (r.status_code, r.text)
    body = r.json()
    if r.status_code == 400:
        assert body["isError"] is True and body["errorCode"] == "INVALID_ARGUMENT", body
    else:
        assert body["collection"] == (collection or "default"), body
        query = urllib.parse.urlsplit(body["status_url"]).query
        assert urllib.parse.parse_qs(query) == {"document": [body["path"]]}, body
    assert not target.exists() and not (writable.home / OUTSIDE).exists()
    # besides uploads/, only the parse markers (pgrag/ingest/attempts.py), named by hashes
    markers = writable.home / "parse-attempts"
    stray = [
        p
        for p in writable.home.rglob("*")
        if not p.is_relative_to(writable.home / "uploads")
        and p != markers
        and not (p.parent == markers and re.fullmatch(r"[0-9a-f]{32}\.[0-9a-f]{12}", p.name))
    ]
    assert stray == [], stray
