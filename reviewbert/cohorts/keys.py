"""A review's key in the shared store: a hash of its text, so a tag, note or relabel
follows the review into any split, file or checkpoint that holds the same text."""
from __future__ import annotations

import hashlib

PREFIX = "t1:"


def review_key(text: str) -> str:
    """``t1:`` and the first 32 hex digits of the SHA-256 of the text with its whitespace
    runs collapsed (so a re-exported file whose line endings changed keeps its tags)."""
    norm = " ".join(str(text).split())
    return PREFIX + hashlib.sha256(norm.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def review_keys(texts) -> list[str]:
    return [review_key(t) for t in texts]
