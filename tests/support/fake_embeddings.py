"""A real OpenAI-compatible embeddings server on 127.0.0.1 that misbehaves on request:
answers 429 or 500 for the first N calls, drops connections, or is slow. Vectors are
deterministic (hashed words), so the provider under test gets real, checkable data."""

from __future__ import annotations

import contextlib
import hashlib
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMS = 16


def vector(text: str) -> list[float]:
    digest = hashlib.sha256(text.encode()).digest()
    return [(b - 127.5) / 127.5 for b in digest[:DIMS]]


@dataclass
class Behaviour:
    fail_first: int = 0  # how many calls fail before the server behaves
    status: int = 429  # the failing calls' HTTP status, or 0 to drop the connection
    delay_s: float = 0.0  # every call sleeps this long first
    calls: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(b: Behaviour) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def do_POST(self) -> None:
            with b.lock:
                b.calls += 1
                n = b.calls
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
            if b.delay_s:
                time.sleep(b.delay_s)
            if n <= b.fail_first:
                if b.status == 0:
                    self.connection.close()
                    return
                kind = {429: "rate_limit_error"}.get(
                    b.status, "server_error" if b.status >= 500 else "invalid_request_error"
                )
                self._send(b.status, {"error": {"message": "not now", "type": kind}})
                return
            texts = body["input"] if isinstance(body["input"], list) else [body["input"]]
            data = [
                {"object": "embedding", "index": i, "embedding": vector(t)}
                for i, t in enumerate(texts)
            ]
            self._send(
                200,
                {
                    "object": "list",
                    "data": data,
                    "model": body.get("model"),
                    "usage": {"prompt_tokens": 1, "total_tokens": 1},
                },
            )

        def _send(self, code: int, payload: dict[str, object]) -> None:
            raw = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(raw)))
            self.end_headers()
            self.wfile.write(raw)

    return Handler


@contextlib.contextmanager
def fake_embedding_server(behaviour: Behaviour) -> Iterator[str]:
    """Yields the /v1 base URL."""
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(behaviour))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
