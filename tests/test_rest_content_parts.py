"""REST `GET /api/documents/{id}/content` under the response cap: a 3 MB text comes in parts
of at most 25,000 tokens and 200 KB, each naming the next with a `Link: <…>; rel="next"`
header, and the parts put together are the extracted text exactly; through a real
`pgrag serve --transport http` on a database of its own."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

import httpx2
import psycopg
import pytest

from pgrag.store.pages import extracted_text
from pgrag.tokens import count_tokens
from tests.support.big_text import big_text
from tests.support.commands import pgrag_cmd
from tests.support.databases import create_database, drop_database
from tests.support.kb_server import HASH_MODEL, child_env, http_server

TOKEN_CAP = 25_000
BYTE_CAP = 200_000
BIG_TEXT_BYTES = 3 << 20
BIG = "big.txt"
SMALL = "small.txt"
SMALL_TEXT = "A short note: the heron ships from dock 7.\n"


@dataclass(frozen=True)
class Served:
    api: httpx2.Client
    texts: dict[str, str]  # path -> the extracted text as stored
    ids: dict[str, str]  # path -> document id

    @property
    def whole(self) -> str:
        return self.texts[BIG]

    @property
    def big_id(self) -> str:
        return self.ids[BIG]


async def stored_text(dsn: str, doc_id: str) -> str:
    async with await psycopg.AsyncConnection.connect(dsn) as conn:
        return await extracted_text(conn, doc_id)


@pytest.fixture(scope="module")
def served(
    server_dsn: str, template_dsn: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    dsn = create_database(server_dsn)
    root = tmp_path_factory.mktemp("rest-parts")
    (root / BIG).write_text(big_text(BIG_TEXT_BYTES), encoding="utf-8")
    (root / SMALL).write_text(SMALL_TEXT, encoding="utf-8")
    ingest = pgrag_cmd(
        "--database-url", dsn, "--embedding-model", HASH_MODEL,
        "ingest", "-q", "-c", "parts", str(root),
    )  # fmt: skip
    try:
        subprocess.run(ingest, check=True, capture_output=True, timeout=600, env=child_env())
        with psycopg.connect(dsn) as conn:
            ids = dict(conn.execute("SELECT path, id::text FROM pgrag.documents").fetchall())
        texts = {path: asyncio.run(stored_text(dsn, doc_id)) for path, doc_id in ids.items()}
        with (
            http_server(dsn, "--embedding-model", HASH_MODEL) as server,
            httpx2.Client(base_url=server.base, timeout=120) as api,
        ):
            yield Served(api, texts, ids)
    finally:
        drop_database(server_dsn, dsn)


def test_a_3mb_text_reassembles_exactly_from_parts_under_the_cap(served: Served) -> None:
    url: str | None = f"/api/documents/{served.big_id}/content"
    parts: list[str] = []
    while url is not None:
        r = served.api.get(url)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
        assert len(r.content) <= BYTE_CAP and count_tokens(r.text) <= TOKEN_CAP, url
        parts.append(r.text)
        url = r.links.get("next", {}).get("url")
        if url is not None:  # the next part starts where this one ended
            assert url.endswith(f"?start={sum(len(p) for p in parts)}"), url
        assert len(parts) < 200, "parts do not end"
    assert len(served.whole.encode()) > 10 * BYTE_CAP
    assert len(parts) > 10 and "".join(parts) == served.whole


def test_a_part_by_the_documents_name_and_past_the_end(served: Served) -> None:
    first = served.api.get(f"/api/documents/{BIG}/content", params={"start": 1000})
    assert first.status_code == 200 and served.whole[1000:].startswith(first.text)
    assert "start=" in first.headers["link"] and served.big_id in first.headers["link"]
    small = served.api.get(f"/api/documents/{served.ids[SMALL]}/content")
    assert small.status_code == 200 and small.text == served.texts[SMALL]
    assert "heron ships" in small.text
    assert "link" not in small.headers  # one part: nothing follows
    past = served.api.get(f"/api/documents/{served.big_id}/content", params={"start": 10**9})
    assert past.status_code == 200 and past.text == "" and "link" not in past.headers


@pytest.mark.parametrize("start", ["x", "-1", "1.5", "1e3", "1" * 13])
def test_a_bad_start_is_invalid_argument(served: Served, start: str) -> None:
    r = served.api.get(f"/api/documents/{served.big_id}/content", params={"start": start})
    assert r.status_code == 400, r.text
    body = r.json()
    assert body["errorCode"] == "INVALID_ARGUMENT" and "start" in body["errorMessage"]
