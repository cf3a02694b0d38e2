"""The REST API of `pgrag serve --transport http` (SPEC §6, seed 000's status codes and error
bodies) against the shared knowledge-base server (tests/support/kb_server.py), plus a
writable server on its own database for uploads and deletions."""

from __future__ import annotations

import socket
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from tests.fixtures.knowledge_base import EXPECTED_PAGE_TERMS, expected_outlines
from tests.support.kb_server import (
    FULL_KEY,
    KB_COLLECTION,
    KB_SHEET_ROWS,
    NOTE_PATH,
    OTHER_PATH,
    OTHER_TEXT,
    SCOPED_KEY,
    HttpServer,
    KnowledgeBase,
    http_server,
    writable_http_server,
)

pytest_plugins = ("tests.support.kb_server",)

OUTLINES = expected_outlines(big_sheet_rows=KB_SHEET_ROWS)
Q1_REPORT = "Finance/2024/Q1/Q1_Report.pdf"
BUDGET = "Finance/2024/Q1/Q1_Budget.xlsx"
VENDOR = "Legal/Acme_Vendor_Agreement.pdf"
CORRUPTED = "test-edge-cases/corrupted.xlsx"
STRATEGY_ZH = "Sales/2023年第四季度销售策略报告.md"
ERROR_KEYS = {"isError", "errorCode", "errorMessage", "errorDetails"}
UPLOAD_TEXT = "Upload probe: the kestrel project ships on 2025-06-30 from warehouse 12.\n"
POLL_DEADLINE_S = 120


@pytest.fixture(scope="module")
def api(kb_http: HttpServer) -> Iterator[httpx2.Client]:
    headers = {"Authorization": f"Bearer {FULL_KEY}"}
    with httpx2.Client(base_url=kb_http.base, headers=headers, timeout=120) as client:
        yield client


@pytest.fixture(scope="module")
def scoped_api(kb_http: HttpServer) -> Iterator[httpx2.Client]:
    headers = {"Authorization": f"Bearer {SCOPED_KEY}"}
    with httpx2.Client(base_url=kb_http.base, headers=headers, timeout=120) as client:
        yield client


def raw_get(base: str, path: str, headers: list[tuple[str, str]]) -> str:
    """The status line and headers of a GET sent byte for byte (a client library would
    refuse or merge repeated headers)."""
    url = urllib.parse.urlsplit(base)
    lines = [f"GET {path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers), "Connection: close"]
    if not any(k.lower() == "host" for k, _ in headers):
        lines.insert(1, f"Host: {url.netloc}")
    with socket.create_connection((url.hostname, url.port), timeout=30) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return reply.decode("latin-1")


def error_body(r: httpx2.Response, status: int, code: str) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.text)
    body = r.json()
    assert set(body) >= ERROR_KEYS and body["isError"] is True, body
    assert body["errorCode"] == code and body["errorMessage"], body
    assert isinstance(body["errorDetails"], dict)
    return body  # type: ignore[no-any-return]


def settled_status(api: httpx2.Client, status_url: str) -> dict[str, Any]:
    """Poll an upload's status until ingestion ends (ready or failed). The deadline only
    keeps a broken server from hanging the suite; it asserts nothing about speed."""
    deadline = time.monotonic() + POLL_DEADLINE_S
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        s = api.get(status_url)
        if s.status_code == 200:
            status = s.json()
            if status["status"] in ("ready", "failed"):
                break
        else:
            assert s.status_code == 404, s.text  # not registered yet
        time.sleep(0.25)
    return status


# ------------------------------------------------------------------------------- read routes


def test_search(api: httpx2.Client, kb: KnowledgeBase) -> None:
    r = api.get("/api/search", params={"q": "limitation of liability", "mode": "semantic"})
    assert r.status_code == 200, r.text
    body = r.json()
    top = body["results"][0]
    assert top["path"] == VENDOR and top["document_id"] == kb.id(VENDOR)
    assert top["location"]["page"] in EXPECTED_PAGE_TERMS[VENDOR]["limitation of liability"]
    assert body["mode"] == "semantic" and set(body["continuation"]) == {"has_more", "token"}
    docs = api.get(
        "/api/search",
        params={"q": "查找关于去年第四季度销售策略的文档", "scope": "documents", "limit": 3},
    ).json()
    assert docs["results"][0]["path"] == STRATEGY_ZH
    narrowed = api.get(
        "/api/search", params={"q": "budget revenue", "mode": "keyword", "file_type": "pdf"}
    ).json()
    assert narrowed["results"] and all(h["path"].endswith(".pdf") for h in narrowed["results"])
    first = api.get("/api/search", params={"q": "agreement", "mode": "keyword", "limit": 2})
    token = first.json()["continuation"]["token"]
    assert first.json()["continuation"]["has_more"] and token
    second = api.get(
        "/api/search",
        params={"q": "agreement", "mode": "keyword", "limit": 2, "continuation_token": token},
    ).json()
    assert second["results"][0]["rank"] == 3
    assert {h["chunk_id"] for h in second["results"]}.isdisjoint(
        h["chunk_id"] for h in first.json()["results"]
    )


def test_search_rejects_bad_parameters(api: httpx2.Client) -> None:
    body = error_body(
        api.get("/api/search", params={"q": "x", "limit": 0}), 400, "INVALID_ARGUMENT"
    )
    assert "limit" in body["errorMessage"]
    error_body(api.get("/api/search"), 400, "INVALID_ARGUMENT")
    error_body(
        api.get("/api/search", params={"q": "x", "mode": "telepathy"}), 400, "INVALID_ARGUMENT"
    )
    # "2.0" is no integer (pydantic's lax mode took it; schemathesis found it on offset)
    for params in ({"q": "x", "limit": "2.0"}, {"q": "x", "max_tokens": "1e3"}):
        error_body(api.get("/api/search", params=params), 400, "INVALID_ARGUMENT")
    error_body(api.get("/api/documents", params={"offset": "0.0"}), 400, "INVALID_ARGUMENT")
    error_body(
        api.get("/api/search", params={"q": "x", "continuation_token": "forged.token"}),
        400,
        "INVALID_ARGUMENT",
    )
    error_body(
        api.get("/api/search", params={"q": "x", "collection": "no-such-collection"}),
        404,
        "NOT_FOUND",
    )


def test_documents_list_pages_by_offset(api: httpx2.Client, kb: KnowledgeBase) -> None:
    seen: list[str] = []
    offset = 0
    while True:
        r = api.get("/api/documents", params={"offset": offset, "limit": 40})
        assert r.status_code == 200, r.text
        page = r.json()["documents"]
        seen += [d["path"] for d in page]
        if len(page) < 40:
            break
        offset += 40
    assert len(seen) == len(set(seen)) and set(seen) == set(kb.ids)
    assert seen == sorted(seen)  # ordered by path
    legal = api.get("/api/documents", params={"folder": "Legal", "file_type": "docx"}).json()
    assert {d["path"] for d in legal["documents"]} == {
        p for p in kb.ids if p.startswith("Legal/") and p.endswith(".docx")
    }
    failed = api.get("/api/documents", params={"status": "failed"}).json()["documents"]
    assert [d["path"] for d in failed] == [CORRUPTED]


def test_document_metadata_and_outline(api: httpx2.Client, kb: KnowledgeBase) -> None:
    r = api.get(f"/api/documents/{kb.id(BUDGET)}")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready" and body["error_code"] is None
    assert body["outline"]["sheets"] == OUTLINES[BUDGET]["sheets"]
    assert body["metadata"]["path"] == BUDGET and body["metadata"]["collection"] == KB_COLLECTION
    by_name = api.get("/api/documents/Q1_Report.pdf").json()
    assert by_name["metadata"]["document_id"] == kb.id(Q1_REPORT)
    assert by_name["outline"]["total_pages"] == OUTLINES[Q1_REPORT]["total_pages"]
    failed = api.get(f"/api/documents/{kb.id(CORRUPTED)}").json()
    assert failed["status"] == "failed" and failed["error_code"] == "CORRUPT_FILE"


def test_document_content_status_codes(api: httpx2.Client, kb: KnowledgeBase) -> None:
    ok = api.get(f"/api/documents/{kb.id(STRATEGY_ZH)}/content")
    assert ok.status_code == 200 and ok.headers["content-type"].startswith("text/plain")
    assert "客户满意度（CSAT）不低于 92%" in ok.text
    empty = api.get("/api/documents/empty.txt/content")
    assert empty.status_code == 200 and empty.text == ""

    missing = error_body(
        api.get("/api/documents/00000000-0000-0000-0000-000000000000/content"), 404, "NOT_FOUND"
    )
    assert "no document" in missing["errorMessage"]
    error_body(api.get("/api/documents/no-such-file.pdf/content"), 404, "NOT_FOUND")

    failed = error_body(
        api.get(f"/api/documents/{kb.id(CORRUPTED)}/content"), 409, "CONTENT_UNAVAILABLE"
    )
    assert "CORRUPT_FILE" in failed["errorMessage"]
    assert failed["errorDetails"]["document_id"] == kb.id(CORRUPTED)

    note = NOTE_PATH.format(2)
    with kb.document_status(note, "processing") as doc_id:
        busy = api.get(f"/api/documents/{doc_id}/content")
        body = error_body(busy, 202, "PROCESSING")
        assert body["status"] == "processing" and busy.headers["retry-after"] == "5"
        assert api.get("/api/status", params={"document": note}).json()["status"] == "processing"
    again = api.get(f"/api/documents/{kb.id(note)}/content")
    assert again.status_code == 200 and again.text.startswith("Bulk note 2:")


def test_status(api: httpx2.Client, kb: KnowledgeBase) -> None:
    body = api.get("/api/status").json()
    counts = dict(kb.sql("SELECT status, count(*) FROM pgrag.documents GROUP BY status"))
    assert {k: v for k, v in body["counts"].items() if v} == counts
    assert body["total"] == len(kb.ids)
    assert [f["path"] for f in body["failed"]] == [CORRUPTED]
    one = api.get("/api/status", params={"document": "corrupted.xlsx"}).json()
    assert one["status"] == "failed" and one["error_code"] == "CORRUPT_FILE"
    assert one["document_id"] == kb.id(CORRUPTED)
    error_body(api.get("/api/status", params={"document": "nope.txt"}), 404, "NOT_FOUND")


def test_ops_routes(api: httpx2.Client) -> None:
    assert api.get("/readyz").json() == {"status": "ready"}
    assert api.get("/healthz").json() == {"status": "ok"}
    spec = api.get("/openapi.json").json()
    for path in (
        "/api/search",
        "/api/documents",
        "/api/documents/{document_id}",
        "/api/documents/{document_id}/content",
        "/api/status",
        "/healthz",
        "/readyz",
    ):
        assert path in spec["paths"], path
    assert {"get", "post"} <= set(spec["paths"]["/api/documents"])
    assert "delete" in spec["paths"]["/api/documents/{document_id}"]


def test_read_only_server_refuses_writes(api: httpx2.Client, kb: KnowledgeBase) -> None:
    r = api.post("/api/documents", files={"file": ("x.txt", b"hello", "text/plain")})
    body = error_body(r, 403, "FORBIDDEN")
    assert "read-only" in body["errorMessage"]
    error_body(api.delete(f"/api/documents/{kb.id(BUDGET)}"), 403, "FORBIDDEN")
    assert kb.sql("SELECT count(*) FROM pgrag.documents WHERE path = %s", (BUDGET,)) == [(1,)]


# ------------------------------------------------------------------------------ auth scopes


def test_rest_without_a_key_is_unauthorized(kb_http: HttpServer) -> None:
    with httpx2.Client(base_url=kb_http.base, timeout=30) as anonymous:
        for path in ("/api/search?q=budget", "/api/documents", "/api/status", "/readyz"):
            body = error_body(anonymous.get(path), 401, "UNAUTHORIZED")
            assert "Bearer" in body["errorMessage"]
        assert anonymous.get("/healthz").status_code == 200


def test_a_scoped_key_sees_only_its_collection(
    scoped_api: httpx2.Client, kb: KnowledgeBase
) -> None:
    listed = scoped_api.get("/api/documents").json()["documents"]
    assert [d["path"] for d in listed] == [OTHER_PATH]
    for path in (BUDGET, CORRUPTED):
        error_body(scoped_api.get(f"/api/documents/{kb.id(path)}"), 404, "NOT_FOUND")
        error_body(scoped_api.get(f"/api/documents/{kb.id(path)}/content"), 404, "NOT_FOUND")
        error_body(scoped_api.get("/api/status", params={"document": path}), 404, "NOT_FOUND")
    hits = scoped_api.get("/api/search", params={"q": "Q1 budget revenue"}).json()["results"]
    assert all(h["path"] == OTHER_PATH for h in hits)
    error_body(
        scoped_api.get("/api/search", params={"q": "budget", "collection": KB_COLLECTION}),
        403,
        "FORBIDDEN",
    )
    status = scoped_api.get("/api/status").json()
    assert status["total"] == 1 and status["failed"] == []
    content = scoped_api.get(f"/api/documents/{kb.id(OTHER_PATH)}/content")
    assert content.status_code == 200 and OTHER_TEXT in content.text


# ------------------------------------------------------------------------ writable server


@pytest.fixture(scope="module")
def writable(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HttpServer]:
    """Its own database, so uploads never change what the shared knowledge base holds."""
    with writable_http_server(server_dsn, tmp_path_factory.mktemp("pgrag-home")) as server:
        yield server


def test_upload_poll_read_and_delete(writable: HttpServer) -> None:
    with httpx2.Client(base_url=writable.base, timeout=60) as api:
        files = {"file": ("kestrel_notes.txt", UPLOAD_TEXT.encode(), "text/plain")}
        r = api.post("/api/documents", files=files)
        assert r.status_code == 202, r.text
        body = r.json()
        assert body["status"] == "pending" and body["path"] == "kestrel_notes.txt"
        status_url = body["status_url"]
        assert status_url == "/api/status?document=kestrel_notes.txt"

        status = settled_status(api, status_url)
        assert status.get("status") == "ready", status
        doc_id = status["document_id"]

        content = api.get(f"/api/documents/{doc_id}/content")
        assert content.status_code == 200 and "kestrel project" in content.text
        found = api.get("/api/search", params={"q": "kestrel", "mode": "keyword"}).json()
        assert [h["document_id"] for h in found["results"]] == [doc_id]

        gone = api.delete(f"/api/documents/{doc_id}")
        assert gone.status_code == 204 and gone.content == b""
        error_body(api.get(f"/api/documents/{doc_id}"), 404, "NOT_FOUND")
        error_body(api.get(f"/api/documents/{doc_id}/content"), 404, "NOT_FOUND")
        error_body(api.delete(f"/api/documents/{doc_id}"), 404, "NOT_FOUND")
        assert (
            api.get("/api/search", params={"q": "kestrel", "mode": "keyword"}).json()["results"]
            == []
        )


def test_upload_needs_a_file_name_with_a_supported_extension(writable: HttpServer) -> None:
    with httpx2.Client(base_url=writable.base, timeout=60) as api:
        r = api.post("/api/documents", files={"file": (".hidden", b"x", "text/plain")})
        error_body(r, 400, "INVALID_ARGUMENT")
        for name in ("notes", "setup.exe", "archive.tar.gz"):
            r = api.post("/api/documents", files={"file": (name, b"x", "text/plain")})
            body = error_body(r, 400, "INVALID_ARGUMENT")
            assert "md" in body["errorDetails"]["supported"], body
        error_body(api.post("/api/documents"), 400, "INVALID_ARGUMENT")


# ------------------------------------------------------------------- DNS rebinding (Host/Origin)

EVIL_HOST = "evil.example.com:8765"


def test_a_rebound_host_or_foreign_origin_reads_and_writes_nothing(writable: HttpServer) -> None:
    """The worst case: loopback bind, no keys, writes on. A page that rebinds its name to
    127.0.0.1 sends its own Host; a cross-site page sends its own Origin. Every route but
    /healthz refuses both before doing anything."""
    with httpx2.Client(base_url=writable.base, timeout=60) as api:
        r = api.post("/api/documents", files={"file": ("guard.txt", UPLOAD_TEXT.encode())})
        assert r.status_code == 202, r.text
        status = settled_status(api, "/api/status?document=guard.txt")
        assert status.get("status") == "ready", status
        doc_id = status["document_id"]
        content = f"/api/documents/{doc_id}/content"
        assert "kestrel" in api.get(content).text

        evil = {"Host": EVIL_HOST}
        for method, path in (
            ("GET", content),
            ("GET", "/api/search?q=kestrel"),
            ("GET", "/api/documents"),
            ("GET", "/api/status"),
            ("GET", "/metrics"),
            ("GET", "/readyz"),
            ("GET", "/openapi.json"),
            ("DELETE", f"/api/documents/{doc_id}"),
            ("GET", "/sse"),
        ):
            body = error_body(api.request(method, path, headers=evil), 421, "INVALID_HOST")
            assert "PGRAG_ALLOWED_HOSTS" in body["errorMessage"], (method, path)
        upload = api.post("/api/documents", headers=evil, files={"file": ("x.txt", b"hi")})
        error_body(upload, 421, "INVALID_HOST")
        rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        error_body(api.post("/mcp", headers=evil, json=rpc), 421, "INVALID_HOST")
        assert api.get("/healthz", headers=evil).status_code == 200  # liveness stays open
        for loose in ("localhost:evil.com", "localhost:8801@evil.com", "localhost:8801, evil.com"):
            error_body(api.get("/api/status", headers={"Host": loose}), 421, "INVALID_HOST")
        # a header sent twice is refused, whichever copy a proxy would have kept (raw: httpx
        # itself refuses to send two Host lines)
        for name, value in (
            ("Host", "localhost"),
            ("Origin", writable.base),
            ("Authorization", "x"),
        ):
            head = raw_get(writable.base, "/api/status", [(name, value), (name, value)])
            assert head.startswith("HTTP/1.1 400"), (name, head)

        cross_site = {"Origin": "https://evil.example.com"}
        loose_origin = {"Origin": "http://localhost:8801.evil.com"}
        error_body(api.get(content, headers=loose_origin), 403, "FORBIDDEN")
        error_body(api.get(content, headers=cross_site), 403, "FORBIDDEN")
        error_body(api.delete(f"/api/documents/{doc_id}", headers=cross_site), 403, "FORBIDDEN")
        error_body(api.post("/mcp", headers=cross_site, json=rpc), 403, "FORBIDDEN")
        # the server's own origin and local tools (loopback origins) are fine
        assert api.get(content, headers={"Origin": writable.base}).status_code == 200
        assert api.get(content, headers={"Origin": "http://localhost:6274"}).status_code == 200
        assert api.get(content, headers={"Host": "localhost"}).status_code == 200

        assert "kestrel" in api.get(content).text  # nothing was deleted
        assert api.delete(f"/api/documents/{doc_id}").status_code == 204


def test_allowed_hosts_and_origins_are_configurable(kb: KnowledgeBase) -> None:
    flags = ("--api-keys", FULL_KEY, "--allowed-hosts", "rag.example.com,10.0.0.5:*")
    env = {"PGRAG_ALLOWED_ORIGINS": "https://app.example.com"}
    auth = {"Authorization": f"Bearer {FULL_KEY}"}
    with (
        http_server(kb.dsn, *flags, env=env) as server,
        httpx2.Client(base_url=server.base, headers=auth, timeout=60) as api,
    ):
        assert api.get("/api/status", headers={"Host": "rag.example.com"}).status_code == 200
        assert api.get("/api/status", headers={"Host": "10.0.0.5:9000"}).status_code == 200
        # naming hosts replaces the loopback default
        error_body(api.get("/api/status"), 421, "INVALID_HOST")
        error_body(api.get("/api/status", headers={"Host": EVIL_HOST}), 421, "INVALID_HOST")
        ok = {"Host": "rag.example.com", "Origin": "https://app.example.com"}
        assert api.get("/api/status", headers=ok).status_code == 200
        own = {"Host": "rag.example.com", "Origin": "https://rag.example.com"}
        assert api.get("/api/status", headers=own).status_code == 200
        bad = {"Host": "rag.example.com", "Origin": "http://localhost:3000"}
        error_body(api.get("/api/status", headers=bad), 403, "FORBIDDEN")
