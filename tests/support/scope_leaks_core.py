"""The scope-leak matrix's probes of the core tools (tests/test_scope_leaks.py): a key
limited to collection A aims each at B, and reads its own A data as a control. A new core
tool adds its rows here and nowhere else: a tool that reads a document its attacks to
DOCUMENT_READS (B's document by id, path and file name must answer what a document that
does not exist answers) and its control to CORE_CONTROLS; a tool of another shape its
attacks to CORE. The matrix fails for a listed tool without an attack and a control."""

from __future__ import annotations

from tests.support.kb_server import BULK_COLLECTION, KB_COLLECTION, OTHER_TEXT
from tests.support.scope_leaks import (
    NO_ID,
    Probe,
    a_folders,
    a_status,
    no_hits,
    nothing_listed,
    only_a,
    refs_to,
    same_as_full,
)

DOCUMENT_READS = [  # tool, a B document (role), further arguments
    ("get_document_outline", "doc", {}),
    ("get_document_outline", "failed", {}),  # NOT_FOUND, not CONTENT_UNAVAILABLE
    ("get_document_outline", "forecast", {}),
    ("get_document_data", "note", {}),
    ("get_document_data", "doc", {"format": "chunks"}),
    ("get_document_data", "failed", {"format": "metadata"}),
    ("get_pages", "pages", {"page_range": "1-3"}),
    ("get_sheet_data", "sheet", {"cell_range": "A1:F20"}),
    ("get_sheet_data", "forecast", {}),
    ("get_sheet_data", "csv", {}),
    ("get_slides", "deck", {"slide_numbers": "1-3"}),
    ("get_status", "doc", {}),
    ("get_status", "failed", {}),
]


CORE_CONTROLS = [  # tool, arguments, what the answer with A's data holds
    ("search", {"query": "heron offsite Lisbon", "mode": "keyword"}, "$a"),
    ("list_folders", {}, '"Other"'),
    ("list_documents", {}, "$a"),
    ("get_document_outline", {"document_id": "$a"}, "$a_path"),
    ("get_document_data", {"document_id": "$a_path"}, "heron"),
    ("get_pages", {"document_id": "$a"}, "heron"),
    ("get_status", {"document_id": "$a_path"}, "$a"),
    ("get_embedding", {"text": OTHER_TEXT}, "dimensions"),
]


SEARCHES = [  # mode, a query only B's documents match, further arguments, check
    (
        "keyword",
        "Acme vendor agreement",
        {"explain": True, "return_scoring_details": True},
        no_hits,
    ),
    ("exact", '"limitation of liability"', {}, no_hits),
    ("regex", r"[a-z.]+@[a-z]+\.com", {}, no_hits),
    ("semantic", "limitation of liability in the vendor agreement", {"explain": True}, None),
    ("hybrid", "Q1 budget revenue forecast", {"scope": "documents"}, None),
    ("hybrid", "第四季度销售策略", {"explain": True}, None),
    ("keyword", "inventory count shelf", {}, no_hits),  # the bulk collection
]


TOKEN_REQUESTS = {  # tool -> the full key's first page of B (the scoped key replays its token)
    "search": {"query": "agreement", "mode": "keyword", "limit": 1},
    "list_documents": {"max_tokens": 50},
    "get_document_data": {"document_id": "$b.huge", "max_tokens": 50},
    "get_pages": {"document_id": "$b.pages", "max_tokens": 50},
    "get_sheet_data": {"document_id": "$b.forecast", "max_tokens": 50},
    "get_slides": {"document_id": "$b.deck", "max_tokens": 50},
}


NO_DOCS = {"document_ids": [NO_ID, "00000000-0000-4000-8000-000000000001"]}


CORE = [
    *[
        Probe(
            "core",
            "search",
            f"{mode}: only B matches {query!r}",
            {"query": query, "mode": mode, "limit": 50, **extra},
            check=check,
        )
        for mode, query, extra, check in SEARCHES
    ],
    Probe(
        "core",
        "search",
        "filter collection kb",
        {"query": "budget", "filters": {"collection": KB_COLLECTION}},
        "FORBIDDEN",
        oracle={"query": "budget", "filters": {"collection": "no-such"}},
    ),
    Probe(
        "core",
        "search",
        "filter collection bulk",
        {"query": "inventory", "mode": "keyword", "filters": {"collection": BULK_COLLECTION}},
        "FORBIDDEN",
    ),
    Probe(
        "core",
        "search",
        "filter B document ids",
        {
            "query": "agreement report",
            "mode": "keyword",
            "filters": {"document_ids": ["$b.doc", "$b.pages"]},
        },
        check=no_hits,
        oracle={"query": "agreement report", "mode": "keyword", "filters": NO_DOCS},
    ),
    Probe(
        "core",
        "search",
        "filter B folder",
        {"query": "agreement liability", "filters": {"folder": "Legal"}},
        check=no_hits,
    ),
    *[
        Probe(
            "core",
            name,
            "continuation token the full key got for B",
            {**args, "continuation_token": f"$token.{name}"},
            "INVALID_ARGUMENT",
        )
        for name, args in TOKEN_REQUESTS.items()
    ],
    Probe(
        "core",
        "get_document_data",
        "B's token on A's document",
        {"document_id": "$a", "max_tokens": 50, "continuation_token": "$token.get_document_data"},
        "INVALID_ARGUMENT",
        full="",
    ),
    Probe("core", "list_folders", "every folder", {}, check=a_folders),
    Probe("core", "list_documents", "everything", {"max_tokens": 25000}, check=only_a),
    Probe("core", "list_documents", "B folder", {"folder": "Legal"}, check=nothing_listed),
    Probe(
        "core",
        "list_documents",
        "failed documents (only B has one)",
        {"status": "failed"},
        check=nothing_listed,
    ),
    Probe("core", "list_documents", "B file type", {"file_type": "pdf"}, check=nothing_listed),
    *[
        p
        for name, role, extra in DOCUMENT_READS
        for p in refs_to("core", name, role, extra, ("id", "path", "file name"))
    ],
    Probe("core", "get_status", "counts by status", {}, check=a_status),
    # get_embedding embeds the text it gets: a B id or B's words give no stored vector
    Probe(
        "core",
        "get_embedding",
        "B document id as text",
        {"text": "$b.doc"},
        full="ok",
        check=same_as_full,
    ),
    Probe(
        "core",
        "get_embedding",
        "B chunk text",
        {"text": "Acme Northwind limitation of liability"},
        full="ok",
        check=same_as_full,
    ),
]
