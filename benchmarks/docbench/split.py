"""docbench's train/test split, so that ranking choices are tuned on one part and judged on
the other. Deterministic and independent of the file's order: within each category the
queries are ordered by the SHA-256 of their id (the query text when they have none) and
the first 60 % (rounded to the nearest) are `train`, the rest `test`. A query added later lands in
one part by its hash; it can move at most one neighbour of its category across the line."""

from __future__ import annotations

import hashlib
import math
from collections import defaultdict
from collections.abc import Sequence
from enum import StrEnum
from typing import Protocol, TypeVar

TRAIN_SHARE = 0.6
Q = TypeVar("Q", bound="Query")


class Split(StrEnum):
    TRAIN = "train"
    TEST = "test"
    ALL = "all"


class Query(Protocol):
    @property
    def query(self) -> str: ...
    @property
    def id(self) -> str | None: ...
    @property
    def category(self) -> str | None: ...


def _key(q: Query) -> str:
    return hashlib.sha256((q.id or q.query).encode("utf-8")).hexdigest()


def train_keys(queries: Sequence[Query]) -> set[str]:
    """The hash keys of the training queries."""
    by_category: dict[str, list[str]] = defaultdict(list)
    for q in queries:
        by_category[q.category or ""].append(_key(q))
    train: set[str] = set()
    for keys in by_category.values():
        train.update(sorted(keys)[: math.floor(TRAIN_SHARE * len(keys) + 0.5)])
    return train


def part_of(q: Query, train: set[str]) -> Split:
    return Split.TRAIN if _key(q) in train else Split.TEST


def select(queries: Sequence[Q], split: Split) -> list[Q]:
    """The queries of one part (all: every query)."""
    if split is Split.ALL:
        return list(queries)
    train = train_keys(queries)
    return [q for q in queries if part_of(q, train) is split]
