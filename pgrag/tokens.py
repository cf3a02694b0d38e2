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


def count_tokens_many(texts: list[str]) -> list[int]:
    """Many short texts (tiktoken's batch API is slower for those: thread hand-offs)."""
    encode = encoding().encode_ordinary
    return [len(encode(t)) for t in texts]
