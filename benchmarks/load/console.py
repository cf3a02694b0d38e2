"""Server time of the web console's pages on the docbench knowledge base.

Builds docbench (18 office files, English and Chinese), ingests it with the bundled model
into a throw-away embedded PostgreSQL, starts `pgrag serve --transport http` with one API
key, signs in as a browser does and requests every page REPEATS times: overview, search
playground (docbench queries in turn, hybrid with explain; its chart reads the score parts
the search logged), documents, one document, doctor excluded (it loads a second model by
design). Reads each page's own `Server-Timing` and prints p50/p95, and as a ratio the p95
of REST `/api/documents` (one listing query) and, for the playground, of REST
`/api/search` of the same queries, measured in the same run. `search_replayed` is the
playground as it was when its chart replayed the search: each playground request's time,
less the read of its logged parts, plus pgrag.explain_parts of the same search with the
logged parts removed (the replay), both timed on the database right after the request.

    python benchmarks/load/console.py [--repeats 40] [--embedding-model hash/384] [--dsn DSN]
        [--out ...]

`--embedding-model hash/384` ingests in seconds instead of minutes (a loaded machine): the
pages then do the same queries, but a search embeds its query with the hash model (~0 ms)
instead of the bundled one (~20 ms a query, README "Benchmarks").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx2
import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docbench"))
import build as docbench
import support

KEY = "bench-key"
QUERIES = Path(__file__).resolve().parents[1] / "docbench" / "queries.jsonl"
BUDGET_MS = 100.0


def pgrag(home: Path, *args: str) -> list[str]:
    return [sys.executable, "-m", "pgrag", "--home", str(home), *args]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def server_ms(response: httpx2.Response) -> float:
    match = re.search(r"dur=([0-9.]+)", response.headers.get("server-timing", ""))
    assert match, f"{response.request.url}: no Server-Timing ({response.status_code})"
    return float(match.group(1))


def signed_in(base: str) -> httpx2.Client:
    client = httpx2.Client(base_url=base, timeout=60)
    form = client.get("/console/login").text
    csrf = re.search(r'name="csrf" value="([^"]+)"', form)
    assert csrf, "no sign-in form"
    assert client.post("/console/login", data={"key": KEY, "csrf": csrf.group(1)}).is_redirect
    return client


def query_ms(conn: psycopg.Connection, query: str, params: tuple[object, ...]) -> float:
    started = time.perf_counter()
    conn.execute(query, params).fetchall()
    return (time.perf_counter() - started) * 1000


def replayed_ms(conn: psycopg.Connection, page: httpx2.Response) -> float:
    """The playground request's time had its chart replayed the search: less the read of
    the logged parts, plus the replay (explain_parts without them)."""
    found = re.search(r'data-search-id="(\d+)"', page.text)
    assert found, "the playground logged no search"
    log_id = (int(found.group(1)),)
    parts = "SELECT * FROM pgrag.explain_parts(%s)"
    stored = query_ms(conn, parts, log_id)
    conn.execute("UPDATE pgrag.search_log SET score_parts = NULL WHERE id = %s", log_id)
    return server_ms(page) - stored + query_ms(conn, parts, log_id)


def measure(base: str, dsn: str, repeats: int) -> dict[str, Any]:
    queries = [json.loads(x)["query"] for x in QUERIES.read_text().splitlines() if x.strip()]
    console = signed_in(base)
    rest = httpx2.Client(base_url=base, timeout=60, headers={"Authorization": f"Bearer {KEY}"})
    doc_id = rest.get("/api/documents", params={"limit": 1}).json()["documents"][0]["document_id"]
    pages = {
        "overview": lambda i: "/",
        "search": lambda i: "/console/search?" + urlencode({"q": queries[i % len(queries)]}),
        "documents": lambda i: "/console/documents",
        "document": lambda i: f"/console/documents/{doc_id}",
    }
    for name, path in pages.items():  # warm: first searches load the model's query path
        assert console.get(path(0)).status_code == 200, name
    timings: dict[str, list[float]] = {name: [] for name in [*pages, "search_replayed"]}
    baseline: dict[str, list[float]] = {"rest_documents": [], "rest_search": []}
    db = psycopg.connect(dsn, autocommit=True)
    for i in range(repeats):
        for name, path in pages.items():
            page = console.get(path(i))
            timings[name].append(server_ms(page))
            if name == "search":
                timings["search_replayed"].append(replayed_ms(db, page))
        for name, path, params in (
            ("rest_documents", "/api/documents", {}),
            ("rest_search", "/api/search", {"q": queries[i % len(queries)], "limit": 10}),
        ):
            started = time.perf_counter()
            assert rest.get(path, params=params).status_code == 200
            baseline[name].append((time.perf_counter() - started) * 1000)
    doc_p95 = percentile(baseline["rest_documents"], 0.95)
    search_p95 = percentile(baseline["rest_search"], 0.95)
    out: dict[str, Any] = {
        name: {
            "p50_ms": round(statistics.median(values), 1),
            "p95_ms": round(percentile(values, 0.95), 1),
            # the search page against REST's search of the same query, the others against
            # REST's document listing
            "p95_vs_rest": round(
                percentile(values, 0.95) / (search_p95 if name.startswith("search") else doc_p95),
                2,
            ),
        }
        for name, values in timings.items()
    }
    for name, values in baseline.items():
        out[name] = {
            "p50_ms": round(statistics.median(values), 1),
            "p95_ms": round(percentile(values, 0.95), 1),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--repeats", type=int, default=40)
    p.add_argument("--port", type=int, default=18799)
    p.add_argument("--embedding-model", default=None, help="default: the bundled model")
    p.add_argument("--dsn", default=None, help="admin DSN (default: an embedded cluster)")
    p.add_argument("--out", type=Path, default=support.RESULTS / "console.json")
    args = p.parse_args(argv)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PGRAG_")}
    env["OMP_NUM_THREADS"] = "1"
    with (
        support.server(args.dsn) as admin,
        tempfile.TemporaryDirectory(prefix="pgrag-console-bench-") as tmp,
    ):
        dsn = support.fresh_database(admin, "console_bench")
        home = Path(tmp) / "home"
        env["PGRAG_DATABASE_URL"] = dsn
        root = docbench.build(Path(tmp))
        if args.embedding_model:
            env["PGRAG_EMBEDDING_MODEL"] = args.embedding_model
        subprocess.run(
            pgrag(home, "ingest", "-q", "-c", "docbench", str(root)), check=True, env=env
        )
        serve = ["--api-keys", KEY, "serve", "--transport", "http", "--port", str(args.port)]
        server = subprocess.Popen(pgrag(home, *serve), env=env, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{args.port}"
            for _ in range(240):
                try:
                    if httpx2.get(base + "/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.HTTPError:
                    time.sleep(0.5)
            result = measure(base, dsn, args.repeats)
        finally:
            server.terminate()
            server.wait(timeout=30)
            support.drop_database(admin, dsn)
    print(f"{'page':<15} {'p50 ms':>8} {'p95 ms':>8} {'p95 / REST':>11}")
    for name, r in result.items():
        ratio = f"{r['p95_vs_rest']}x" if "p95_vs_rest" in r else "(baseline)"
        print(f"{name:<15} {r['p50_ms']:>8} {r['p95_ms']:>8} {ratio:>11}")
    pages = [n for n, r in result.items() if "p95_vs_rest" in r and n != "search_replayed"]
    over = [n for n in pages if result[n]["p95_ms"] > BUDGET_MS]
    replay = result["search_replayed"]["p95_ms"] / result["search"]["p95_ms"]
    print(f"playground p95, replayed chart / logged parts: {replay:.2f}x")
    print("every page within 100 ms p95" if not over else f"over 100 ms p95: {', '.join(over)}")
    record = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.machine()} {os.cpu_count()} cores",
        "repeats": args.repeats,
        "embedding_model": args.embedding_model or "bundled",
        "pages": result,
    }
    args.out.write_text(json.dumps(record, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
