"""The soak's hostile client: one MCP session and raw HTTP connections sending, back to
back, the inputs pgrag's hostile-input fixes defend against, while the normal clients
search. Its calls are timed apart from theirs; the soak compares the normal clients'
latencies with it and without it in the same run.

Each loop sends:
- a search of ~570 distinct words at the 4,000-character query limit (hybrid: the query is
  embedded too), and a backtracking regex search (`(.|..)+#|e`, 50 hits);
- get_sheet_data of a one-row, 16,384-column CSV (the widest ingestion accepts) at the
  full 25,000-token budget, walking its continuation tokens;
- resources/read of a 3 MB text, walking its parts (`?start=`);
- a search whose query holds NUL characters;
- raw POSTs to /mcp: JSON nested 100,000 deep (a parse error is expected) and a spoofed
  `Host: localhost:evil.com` (400 expected);
and `SLOW_SOCKETS` connections trickle a request's headers a byte at a time
(slowloris), reopened when the server drops them.
"""

from __future__ import annotations

import asyncio
import contextlib
import csv
import os
import random
import sys
import time
import urllib.parse
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

HOSTILE_COLLECTION = "hostile"
# the soak's callers: the normal clients share one key, the hostile client has its own (the
# server tells callers apart by key: pgrag/services/admission.py)
NORMAL_KEY = "soak-normal-key"
HOSTILE_KEY = "soak-hostile-key"
HOSTILE_MODEL = "hash/384"
WIDE_COLUMNS = 16_384
BIG_TEXT_BYTES = 3 << 20
QUERY_LIMIT_CHARS = 4000
HOSTILE_REGEX = "(.|..)+#|e"  # backtracks at every start in text without '#'
NESTING = 100_000
SLOW_SOCKETS = 16
SLOW_BYTE_EVERY_S = 2.0
SESSION_KINDS = ("long_query", "regex", "wide_sheet", "read_text", "nul_query")  # a round's order
EXPECTED_CODES = ("TIMEOUT", "INVALID_ARGUMENT", "RATE_LIMITED")  # RATE_LIMITED: its share spent
EXPECTED_STATUSES = {"nested_json": {400}, "spoofed_host": {400, 421}}

_ONSETS = ("b", "c", "d", "f", "g", "l", "m", "n", "p", "r", "s", "t", "v", "br", "st", "pl")
_RIMES = ("a", "e", "i", "o", "u", "ar", "en", "il", "on", "us", "er", "al")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def long_query(rng: random.Random) -> str:
    """Distinct pronounceable words up to the query length limit."""
    words: dict[str, None] = {}
    size = 0
    while True:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_RIMES) for _ in range(2))
        if w in words:
            continue
        if size + len(w) + 1 > QUERY_LIMIT_CHARS:
            return " ".join(words)
        words[w] = None
        size += len(w) + 1


def write_corpus(folder: Path) -> None:
    """The wide sheet and the big text the hostile client reads."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "wide.csv").open("w", newline="") as f:
        csv.writer(f).writerow(
            [f"measurement {j:05d} of the wide sheet" for j in range(WIDE_COLUMNS)]
        )
    rng = random.Random(5)
    words = ["budget", "forecast", "café", "北京", "straße", "ledger", "région", "notes"]
    lines, size = [], 0
    while size < BIG_TEXT_BYTES:
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(5, 25))) + ".")
        size += len(lines[-1].encode()) + 1
    (folder / "big.txt").write_text("\n".join(lines), encoding="utf-8")


async def ingest_corpus(dsn: str, folder: Path) -> None:
    proc = await asyncio.create_subprocess_exec(
        *(sys.executable, "-m", "pgrag", "--database-url", dsn),
        *("--embedding-model", HOSTILE_MODEL, "ingest", "-q", "-c", HOSTILE_COLLECTION),
        str(folder),
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"ingesting the hostile corpus failed: {err.decode()[-500:]}")


@dataclass
class HostileStats:
    calls: dict[str, int] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    unexpected: list[str] = field(default_factory=list)  # outcomes the fixes should prevent
    slow_sockets_opened: int = 0

    def record(self, kind: str, seconds: float, problem: str | None = None) -> None:
        self.calls[kind] = self.calls.get(kind, 0) + 1
        self.seconds[kind] = self.seconds.get(kind, 0.0) + seconds
        if problem and len(self.unexpected) < 20:
            self.unexpected.append(f"{kind}: {problem[:300]}")

    def summary(self) -> dict[str, Any]:
        return {
            "calls": dict(self.calls),
            "mean_ms": {
                k: round(1000 * self.seconds[k] / n, 1) for k, n in self.calls.items() if n
            },
            "unexpected": list(self.unexpected),
            "slow_sockets_opened": self.slow_sockets_opened,
        }


class HostileClient:
    def __init__(self, url: str, stats: HostileStats) -> None:
        self.url, self.stats = url, stats
        self.rng = random.Random(26)
        self.sheet_token: str | None = None
        self.text_uri: str | None = None
        self.text_id: str | None = None

    async def _tool(self, session: ClientSession, kind: str, args: dict[str, Any]) -> Any:
        t = time.perf_counter()
        name = "get_sheet_data" if kind == "wide_sheet" else "search"
        r = await session.call_tool(name, args)
        body = r.structured_content or {}
        code = (body.get("error") or {}).get("code")
        problem = None if code in (None, *EXPECTED_CODES) else f"error {code}"
        if len(str(r.content[0].text).encode()) > 200_000:  # type: ignore[union-attr]
            problem = "answer over 200 KB"
        self.stats.record(kind, time.perf_counter() - t, problem)
        return body

    async def _read_text(self, session: ClientSession) -> None:
        if self.text_id is None:
            found = await session.call_tool("get_document_outline", {"document_id": "big.txt"})
            self.text_id = ((found.structured_content or {}).get("data") or {}).get("document_id")
            if self.text_id is None:
                self.stats.record("read_text", 0.0, f"big.txt not found: {found.content}")
                return
        uri = self.text_uri or f"pgrag://documents/{self.text_id}/content"
        t = time.perf_counter()
        try:
            text = (await session.read_resource(uri)).contents[0].text  # type: ignore[union-attr]
        except MCPError as exc:
            code = (exc.error.data or {}).get("code") if isinstance(exc.error.data, dict) else None
            problem = None if code in EXPECTED_CODES else f"{code}: {exc.error.message}"
            self.stats.record("read_text", time.perf_counter() - t, problem)
            return
        problem = "part over 200 KB" if len(text.encode()) > 200_000 else None
        self.stats.record("read_text", time.perf_counter() - t, problem)
        marker = text.rfind("Read pgrag://documents/")  # the note naming the next part
        self.text_uri = text[marker + 5 :].split(" ", 1)[0] if marker >= 0 else None

    async def call(self, session: ClientSession, kind: str) -> None:
        """One call of a kind of SESSION_KINDS."""
        if kind == "read_text":
            await self._read_text(session)
        elif kind == "wide_sheet":
            sheet = {"document_id": "wide.csv", "max_tokens": 25000}
            if self.sheet_token:
                sheet["continuation_token"] = self.sheet_token
            body = await self._tool(session, "wide_sheet", sheet)
            self.sheet_token = (body.get("continuation") or {}).get("token")
        elif kind == "long_query":
            await self._tool(session, kind, {"query": long_query(self.rng), "limit": 10})
        elif kind == "regex":
            await self._tool(session, kind, {"query": HOSTILE_REGEX, "mode": "regex", "limit": 50})
        else:
            await self._tool(session, kind, {"query": "budget\u0000forecast\u0000", "limit": 5})

    async def raw_calls(self, hc: httpx2.AsyncClient) -> None:
        """The nested JSON and the spoofed Host, sent past the MCP client."""
        await self._raw(hc, "nested_json", b"[" * NESTING + b"]" * NESTING, None)
        await self._raw(hc, "spoofed_host", b"{}", "localhost:evil.com")

    async def _raw(self, hc: httpx2.AsyncClient, kind: str, body: bytes, host: str | None) -> None:
        headers = {
            "content-type": "application/json",
            "accept": "application/json, text/event-stream",
        }
        if host:
            headers["host"] = host
        t = time.perf_counter()
        try:
            r = await hc.post(self.url, content=body, headers=headers)
            problem = None if r.status_code in EXPECTED_STATUSES[kind] else f"HTTP {r.status_code}"
        except httpx2.HTTPError as exc:
            problem = f"{type(exc).__name__}: {exc}"
        self.stats.record(kind, time.perf_counter() - t, problem)

    async def run(self, stop: asyncio.Event) -> None:
        while not stop.is_set():
            try:
                async with (
                    httpx2.AsyncClient(
                        headers=bearer(HOSTILE_KEY), timeout=httpx2.Timeout(120)
                    ) as hc,
                    streamable_http_client(self.url, http_client=hc) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    while not stop.is_set():
                        for kind in SESSION_KINDS:
                            await self.call(session, kind)
                        await self.raw_calls(hc)
            except Exception as exc:  # the session failed: count it, reconnect
                self.stats.record("session", 0.0, f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(1)


async def slow_socket(url: str, stats: HostileStats, stop: asyncio.Event) -> None:
    """Open a connection and trickle a request's headers a byte at a time; again when the
    server closes it."""
    parts = urllib.parse.urlsplit(url)
    request = (
        f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        "Content-Type: application/json\r\nX-Padding: " + "a" * 4000
    ).encode()
    while not stop.is_set():
        writer = None
        try:
            _, writer = await asyncio.open_connection(parts.hostname, parts.port)
            stats.slow_sockets_opened += 1
            for i in range(len(request)):
                if stop.is_set():
                    break
                writer.write(request[i : i + 1])
                await writer.drain()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), timeout=SLOW_BYTE_EVERY_S)
        except OSError:
            await asyncio.sleep(0.5)
        finally:
            if writer is not None:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()


async def run_hostile(url: str, stats: HostileStats, stop: asyncio.Event) -> None:
    """The hostile session and the slow sockets until `stop`."""
    tasks = [asyncio.create_task(HostileClient(url, stats).run(stop))]
    tasks += [asyncio.create_task(slow_socket(url, stats, stop)) for _ in range(SLOW_SOCKETS)]
    await stop.wait()
    _, pending = await asyncio.wait(tasks, timeout=60)
    for t in pending:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


# -- the phases of a soak with a hostile client ------------------------------------------
