"""A multi-megabyte text of short multilingual lines (accents, CJK, ß): what a document
over the response cap looks like to the transports that hand out its text in parts."""

from __future__ import annotations

import random

WORDS = ("budget", "forecast", "café", "北京", "straße", "région", "ledger", "übersicht")


def big_text(size_bytes: int, seed: int = 5) -> str:
    """Lines of 5 to 25 words until the text is `size_bytes` of UTF-8."""
    rng = random.Random(seed)
    lines: list[str] = []
    size = 0
    while size < size_bytes:
        line = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 25))) + "."
        lines.append(line)
        size += len(line.encode()) + 1
    return "\n".join(lines)
