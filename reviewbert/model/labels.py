"""Label schemes: 5 labels (1-5 stars) or 3 labels (negative/neutral/positive).

A scheme maps a star rating (int 1..5) to a class id, and names the classes.
Everything that turns stars into classes goes through here, so the checkpoint's
``id2label``, the metrics and the app never disagree.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LabelScheme:
    num_labels: int
    names: tuple[str, ...]
    star_to_id: dict  # star (1..5) -> class id

    @property
    def id2label(self) -> dict[int, str]:
        return {i: n for i, n in enumerate(self.names)}

    @property
    def label2id(self) -> dict[str, int]:
        return {n: i for i, n in enumerate(self.names)}

    @property
    def ordinal(self) -> bool:
        """Relaxed accuracy (within one class) only means something for 5 stars."""
        return self.num_labels == 5

    def class_of(self, star: int) -> int:
        return self.star_to_id[int(star)]

    def stars_of(self, class_id: int) -> tuple[int, ...]:
        return tuple(s for s, c in sorted(self.star_to_id.items()) if c == class_id)


FIVE = LabelScheme(5, ("1 star", "2 stars", "3 stars", "4 stars", "5 stars"),
                   {1: 0, 2: 1, 3: 2, 4: 3, 5: 4})
THREE = LabelScheme(3, ("negative", "neutral", "positive"),
                    {1: 0, 2: 0, 3: 1, 4: 2, 5: 2})

SCHEMES = {5: FIVE, 3: THREE}


def get_scheme(num_labels: int) -> LabelScheme:
    try:
        return SCHEMES[int(num_labels)]
    except (KeyError, ValueError):
        raise ValueError(f"labels must be 5 or 3, got {num_labels!r}") from None


def scheme_from_id2label(id2label: dict) -> LabelScheme:
    """Recover the scheme of a saved checkpoint from its config's id2label."""
    names = tuple(str(id2label[k]) for k in sorted(id2label, key=int))
    for s in SCHEMES.values():
        if names == s.names:
            return s
    raise ValueError(f"checkpoint labels {names} are not a ReviewBERT label scheme")
