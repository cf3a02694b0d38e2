"""The scope-leak matrix's probes of set_chunk_enabled (tests/test_scope_leaks.py): a key
aims it at a chunk of a collection it may not use and must get NOT_FOUND, the answer for a
chunk that does not exist."""

from __future__ import annotations

from tests.support.scope_leaks import Probe

NO_CHUNK = 2**62  # a chunk id that exists nowhere
CHUNK_ATTACKS = [  # enabling an enabled chunk: the full key's call changes nothing
    Probe(
        "write",
        "set_chunk_enabled",
        attack,
        {"chunk_id": ref, "enabled": True},
        "NOT_FOUND",
        full="ok",
        writes=True,
        oracle={"chunk_id": NO_CHUNK, "enabled": True},
        attacker=who,
    )
    for attack, ref, who in [
        ("B's chunk", "$chunk.doc", "scoped"),
        ("other's chunk, by a key limited to kb", "$chunk.a", "writer"),
    ]
]
