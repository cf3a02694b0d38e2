"""Table sources (issue 40): what a source's triggers cost the user's writes: a bulk
`INSERT … SELECT` and single-row INSERTs and UPDATEs into two identical tables, one a
source and one not, the variants alternating (targets: bulk ≤ 1.3×, single-row p95
≤ +0.3 ms). Run through `table_sync.py` (its part `write_cost`)."""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: support.py
import support

TABLE_SQL = """
CREATE TABLE {name} (id bigint PRIMARY KEY, subject text, body text, customer text,
                     views int NOT NULL DEFAULT 0)
"""
BULK_SQL = """
INSERT INTO {name} (id, subject, body, customer)
SELECT g, 'Ticket ' || g, 'The printer on floor ' || (g %% 9) || ' reports error E' || g,
       (ARRAY['acme', 'globex', 'initech'])[1 + g %% 3]
FROM generate_series(%s::bigint, %s::bigint) g
"""


def _tables(conn: Any) -> None:
    """Two identical tables, w_source a source and w_plain not."""
    for name in ("w_plain", "w_source"):
        conn.execute(f"DROP TABLE IF EXISTS {name}")
        conn.execute(TABLE_SQL.format(name=name))
    conn.execute(
        "SELECT pgrag.add_table_source('w_source', ARRAY['body'], title_column => 'subject',"
        " metadata_columns => ARRAY['customer'], source_name => 'w_source')"
    )


def write_cost(dsn: str, bulk: int, single: int, rounds: int) -> dict[str, Any]:
    """Bulk and single-row write times with and without a source. The variants alternate:
    the bulk statements round by round (each round swapping which goes first), the single-row
    statements one by one, so a burst of load from other jobs falls on both alike."""
    times: dict[str, dict[str, list[float]]] = {
        v: {"bulk": [], "insert": [], "update": []} for v in ("plain", "source")
    }
    order = ("plain", "source")
    with support.connect(dsn) as conn:
        for r in range(rounds):
            _tables(conn)
            for variant in order if r % 2 == 0 else order[::-1]:
                conn.execute("CHECKPOINT")  # neither pays for the other's dirty pages
                t0 = time.perf_counter()
                conn.execute(BULK_SQL.format(name=f"w_{variant}"), (1, bulk))
                times[variant]["bulk"].append(time.perf_counter() - t0)
            for op, sql in (
                ("insert", "INSERT INTO {name} (id, subject, body) VALUES (%s, 's', 'b')"),
                ("update", "UPDATE {name} SET body = 'c' || id WHERE id = %s"),
            ):
                for i in range(bulk + 1, bulk + single + 1):
                    for variant in order if i % 2 == 0 else order[::-1]:
                        t0 = time.perf_counter()
                        conn.execute(sql.format(name=f"w_{variant}"), (i,))
                        times[variant][op].append(time.perf_counter() - t0)
            conn.execute("SELECT pgrag.remove_table_source('w_source')")
            conn.execute("DELETE FROM pgrag.table_sources WHERE name = 'w_source'")
    plain, source = times["plain"], times["source"]
    single_ms = {
        op: {
            "plain": support.percentiles_ms(plain[op]),
            "source": support.percentiles_ms(source[op]),
        }
        for op in ("insert", "update")
    }
    return {
        "bulk_rows": bulk,
        "rounds": rounds,
        "bulk_s": {
            "plain": statistics.median(plain["bulk"]),
            "source": statistics.median(source["bulk"]),
        },
        "bulk_ratio": round(
            statistics.median(source["bulk"]) / statistics.median(plain["bulk"]), 3
        ),
        "single_ms": single_ms,
        "single_p95_added_ms": {
            op: round(single_ms[op]["source"]["p95_ms"] - single_ms[op]["plain"]["p95_ms"], 3)
            for op in ("insert", "update")
        },
    }
