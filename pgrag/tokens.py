"""Token counting with a real tokenizer that works offline (tiktoken cl100k_base, whose BPE
file ships inside the litellm wheel), used for chunk sizes and response budgets."""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from pathlib import Path
from typing import Any


def _bundled_tiktoken_dir() -> str | None:
    spec = importlib.util.find_spec("litellm")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "litellm_core_utils" / "tokenizers"
    return str(path) if path.is_dir() else None


@lru_cache(maxsize=1)
def encoding() -> Any:
    # never let tiktoken download: point it at the copy litellm ships (no litellm import)
    if "TIKTOKEN_CACHE_DIR" not in os.environ and (bundled := _bundled_tiktoken_dir()):
        os.environ["TIKTOKEN_CACHE_DIR"] = bundled
    import tiktoken

    return tiktoken.get_encoding("cl100k_base")


def count_tokens(text: str) -> int:
    if not text:
        return 0
    return len(encoding().encode_ordinary(text))


# cl100k's pre-tokenizer always cuts `, "` between the comma and the space (a run of
# punctuation stops at whitespace; a piece that starts with a space and a quote is a new
# one) and BPE never crosses its cuts, so JSON split there counts exactly as the whole.
# The pieces of responses repeat (`"page": null,` in every hit; each hit is counted for the
# page budget and again inside the envelope), so cached piece counts make the second count
# nearly free. tests/test_tokens.py checks the equality against whole-text counts.
JSON_CUT = ', "'
MAX_CACHED_PIECE = 400  # characters: longer pieces are counted each time, not kept
PIECE_CACHE_SIZE = 20_000  # at most ~10 MB


@lru_cache(maxsize=PIECE_CACHE_SIZE)
def _piece_tokens(piece: str) -> int:
    return len(encoding().encode_ordinary(piece))


def count_json_tokens(text: str) -> int:
    """count_tokens of JSON text (json.dumps' default separators), reusing piece counts."""
    if JSON_CUT not in text:
        return count_tokens(text)
    encode = encoding().encode_ordinary
    parts = text.split(JSON_CUT)
    pieces = [parts[0] + ","] + [' "' + p + "," for p in parts[1:-1]] + [' "' + parts[-1]]
    return sum(_piece_tokens(p) if len(p) <= MAX_CACHED_PIECE else len(encode(p)) for p in pieces)


def count_tokens_many(texts: list[str]) -> list[int]:
    """Many short texts (tiktoken's batch API is slower for those: thread hand-offs)."""
    encode = encoding().encode_ordinary
    return [len(encode(t)) for t in texts]


def cut_to_tokens(text: str, limit: int) -> tuple[str, bool]:
    """The text, or its first `limit` tokens when longer (and whether it was cut)."""
    tokens = encoding().encode_ordinary(text)
    if len(tokens) <= limit:
        return text, False
    return encoding().decode(tokens[:limit]), True
