"""A tiny SearXNG stand-in: a real HTTP server on 127.0.0.1 that answers
`GET /search?q=…&format=json` in SearXNG's JSON format with canned results, counts its hits,
and can be told to fail (HTTP status), to answer slowly, or to answer HTML."""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.servers import QuietHandler

CANNED_RESULTS = 25
OLD_EVERY = 5  # every 5th result was published two years ago


def canned_results(query: str) -> list[dict[str, Any]]:
    """25 results in SearXNG's shape, plus the oddities real instances return: one without
    a URL and one duplicate URL (both must be dropped by normalisation)."""
    now = datetime.now(UTC).replace(microsecond=0)
    results: list[dict[str, Any]] = []
    for i in range(1, CANNED_RESULTS + 1):
        if i % OLD_EVERY == 0:
            published: str | None = (now - timedelta(days=730)).isoformat()
        elif i % 3 == 0:
            published = None
        else:
            published = (now - timedelta(days=i)).replace(tzinfo=None).isoformat()  # naive
        results.append(
            {
                "url": f"https://example.org/{i}",
                "title": f"  Result {i}\n for {query}  ",
                "content": f"Snippet   number {i} about {query}.",
                "engine": "duckduckgo" if i % 2 else "bing",
                "engines": ["duckduckgo", "brave"] if i % 2 else ["bing"],
                "score": round(10.0 / i, 4),
                "category": "general",
                "publishedDate": published,
                "parsed_url": ["https", "example.org", f"/{i}", "", "", ""],
                "positions": [i],
            }
        )
        if i == 2:
            results.append({"title": "no url", "content": "dropped", "engine": "bing"})
            results.append(dict(results[0]))  # the same URL again
    return results


class FakeSearxng:
    """`with FakeSearxng() as sx:` → `sx.url`; `sx.hits`; `sx.requests` (query dicts);
    set `sx.status` (e.g. 500), `sx.delay` (seconds) or `sx.html = True` to misbehave."""

    def __init__(self) -> None:
        self.hits = 0
        self.requests: list[dict[str, str]] = []
        self.status = 200
        self.delay = 0.0
        self.html = False
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def __enter__(self) -> FakeSearxng:
        fake = self

        class Handler(QuietHandler):
            def do_GET(self) -> None:
                parsed = urlparse(self.path)
                args = {k: v[0] for k, v in parse_qs(parsed.query).items()}
                with fake._lock:
                    fake.hits += 1
                    fake.requests.append(args)
                if fake.delay:
                    time.sleep(fake.delay)
                if parsed.path != "/search":
                    self._send(404, b"not found", "text/plain")
                elif fake.status != 200:
                    self._send(fake.status, b"<h1>error</h1>", "text/html")
                elif fake.html or args.get("format") != "json":
                    self._send(200, b"<html><body>results</body></html>", "text/html")
                else:
                    q = args.get("q", "")
                    body = {
                        "query": q,
                        "number_of_results": 1234,
                        "results": canned_results(q),
                        "answers": [],
                        "corrections": [],
                        "infoboxes": [],
                        "suggestions": [],
                        "unresponsive_engines": [],
                    }
                    self._send(200, json.dumps(body).encode(), "application/json")

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
