"""A rerank API stand-in: a real HTTP server on 127.0.0.1 that answers `POST …/rerank`
(Cohere /v1 and /v2, Jina /v1: `{query, documents, top_n}` in, `{results: [{index,
relevance_score}], meta}` out) by reversing the order it was sent, records every request,
and can be told to misbehave: an error status, a slow answer, an HTML body, an index out
of range (malformed) or scores for half the documents (partial)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import ThreadingHTTPServer
from typing import Any

from tests.support.servers import QuietHandler

# litellm prices cohere/rerank-english-v3.0 at this per search unit (its bundled cost map)
MODEL = "cohere/rerank-english-v3.0"
COST_PER_SEARCH = 0.002


@dataclass
class Misbehaviour:
    status: int = 200
    delay: float = 0.0
    html: bool = False
    bad_index: bool = False
    partial: bool = False
    hold: threading.Event | None = None  # no answer until the test sets it


@dataclass
class FakeReranker:
    """`with FakeReranker() as rr:` → `rr.url` (the api_base); `rr.requests` (JSON bodies);
    set fields of `rr.fault` to misbehave."""

    fault: Misbehaviour = field(default_factory=Misbehaviour)
    requests: list[dict[str, Any]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def answer(self, body: dict[str, Any]) -> tuple[int, bytes, str]:
        f = self.fault
        if f.hold is not None:
            f.hold.wait(30)
        if f.delay:
            time.sleep(f.delay)
        if f.status != 200:
            return f.status, b'{"message": "rerank model overloaded"}', "application/json"
        if f.html:
            return 200, b"<html><body>gateway</body></html>", "text/html"
        n = len(body["documents"])
        # the last document sent first: an order no fused ranking produces by chance
        results = [{"index": i, "relevance_score": round((i + 1) / n, 6)} for i in range(n)]
        results.reverse()
        if f.partial:
            results = results[: n // 2]
        if f.bad_index:
            results[0]["index"] = n
        payload = {"id": "rr", "results": results, "meta": {"billed_units": {"search_units": 1}}}
        return 200, json.dumps(payload).encode(), "application/json"

    def __enter__(self) -> FakeReranker:
        fake = self

        class Handler(QuietHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                fake.requests.append(body)
                if not self.path.endswith("/rerank"):
                    self._send(404, b"not found", "text/plain")
                else:
                    self._send(*fake.answer(body))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()
