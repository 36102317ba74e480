"""What each attention head does: Clark et al.'s numbers, a Kovaleva-style label, and how far
fine-tuning moved it (Jensen–Shannon divergence from the base model).

Everything here reads attention probabilities ``[batch, head, query, key]`` of one layer
with the batch's token kinds (:class:`TokenKinds`) and adds them to running sums, so a
whole split goes through in batches; nothing keeps a review's matrices.

The atlas (Clark et al. 2019, "What Does BERT Look At?"), per head, averaged over
every query row of every review (padding excluded):

=============  =================================================================
``cls``        attention mass on [CLS] (position 0)
``sep``        mass on [SEP]
``punct``      mass on punctuation tokens (every character a Unicode punctuation
               or symbol, e.g. ``.`` ``,`` ``!`` ``)``)
``prev``       mass on the previous token, over the rows whose previous token is a
               word piece (attention to [CLS] and [SEP] counts as ``cls``/``sep``
               only, so a head that looks at [CLS] is not also called diagonal)
``next``       mass on the next token (rows whose next token is a word piece)
``self``       mass on the token itself (rows of word pieces)
``entropy``    entropy of the row, in nats (a uniform row over n tokens: ln n)
``sentence``   mass on the query's own sentence minus what an even spread would
               put there (rows of words only; sentences end at ``.`` ``!`` ``?``;
               [CLS] and [SEP] belong to none): > 0 when a head stays in its
               sentence
=============  =================================================================

The label (:func:`role`), Kovaleva et al. 2019's patterns from these numbers, with
``V = cls + sep + punct`` (vertical: the same few columns for every row) and
``D = prev + self + next`` (diagonal: the token and its neighbours), first match wins:

1. **vertical**: V ≥ 0.5 and D < 0.2;
2. **diagonal**: D ≥ 0.5 and V < 0.3;
3. **vertical + diagonal**: V + D ≥ 0.6, V ≥ 0.2 and D ≥ 0.2;
4. **block**: sentence ≥ 0.15 (it keeps to the query's own sentence well beyond chance);
5. **heterogeneous**: anything else (spread over the review, changing with the input).

Jensen–Shannon divergence (fine-tuned vs base model, same reviews): per row,
``JS(p, q) = ½ KL(p‖m) + ½ KL(q‖m)`` with ``m = (p + q) / 2``, in bits (0: the same row;
1: no key in common), averaged over the rows of every review. Written here in torch
rather than called from ``scipy.spatial.distance.jensenshannon``: a batch is
``[B, H, T, T]`` and scipy's float64 temporaries for it run to hundreds of MB;
``tests/unit/test_heads.py`` checks both against scipy on the same rows.
"""
from __future__ import annotations

import unicodedata
from dataclasses import dataclass

import numpy as np
import torch

STATS = ("cls", "sep", "punct", "prev", "next", "self", "entropy", "sentence")
STAT_LABELS = {"cls": "[CLS]", "sep": "[SEP]", "punct": "punctuation", "prev": "previous token",
               "next": "next token", "self": "itself", "entropy": "row entropy (nats)",
               "sentence": "own sentence (beyond chance)"}
ROLES = ("vertical", "diagonal", "vertical + diagonal", "block", "heterogeneous")
VERTICAL, DIAGONAL, BOTH_MIN, BOTH_SUM, BLOCK = 0.5, 0.5, 0.2, 0.6, 0.15
SENTENCE_END = frozenset(".!?")


# ------------------------------------------------------------------ token kinds
def is_punctuation(token: str) -> bool:
    """A wordpiece made only of punctuation or symbols ("##" continuation marks aside)."""
    t = token[2:] if token.startswith("##") else token
    return bool(t) and all(unicodedata.category(c)[0] in "PS" for c in t)


def vocab_kinds(tokenizer) -> tuple[torch.Tensor, torch.Tensor]:
    """(punctuation, sentence end) as bool lookups over the vocabulary's ids."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    punct = torch.tensor([is_punctuation(t or "") for t in tokens], dtype=torch.bool)
    end = torch.tensor([(t or "") in SENTENCE_END for t in tokens], dtype=torch.bool)
    return punct, end


@dataclass
class TokenKinds:
    """What each position of a padded batch is, all ``[B, T]``."""
    valid: torch.Tensor       # a real token (not padding)
    cls: torch.Tensor
    sep: torch.Tensor
    punct: torch.Tensor
    sentence: torch.Tensor    # long: sentence number of a word token, -1 for specials/padding

    @classmethod
    def of(cls, ids: torch.Tensor, mask: torch.Tensor, sep_id: int, punct_lookup: torch.Tensor,
           end_lookup: torch.Tensor) -> "TokenKinds":
        valid = mask.bool()
        is_cls = torch.zeros_like(valid)
        is_cls[:, 0] = True
        sep = (ids == sep_id) & valid
        word = valid & ~is_cls & ~sep
        ends = end_lookup[ids] & word
        # a sentence-ending mark belongs to the sentence it ends: count the ends before it
        before = torch.cumsum(ends.long(), dim=1) - ends.long()
        sentence = torch.where(word, before, torch.full_like(before, -1))
        return cls(valid, is_cls, sep, punct_lookup[ids] & valid, sentence)

    @classmethod
    def from_tokens(cls, tokens: list[str]) -> "TokenKinds":
        """One review from its wordpieces (the hand-made matrices of the tests, one example)."""
        ids = torch.arange(len(tokens))[None]
        punct = torch.tensor([is_punctuation(t) for t in tokens])
        end = torch.tensor([t in SENTENCE_END for t in tokens])
        sep_id = tokens.index("[SEP]") if "[SEP]" in tokens else -1
        return cls.of(ids, torch.ones_like(ids), sep_id, punct, end)


# ------------------------------------------------------------------ running sums
class Atlas:
    """Running sums of the atlas numbers for every (layer, head)."""

    def __init__(self, layers: int, heads: int):
        self.sums = {s: np.zeros((layers, heads)) for s in STATS}
        self.counts = {s: np.zeros(layers) for s in STATS}

    def add(self, layer: int, att: torch.Tensor, kinds: TokenKinds) -> None:
        """``att`` [B, H, T, T] probabilities of ``layer`` (rows of padding are ignored)."""
        a = att.double()
        v = kinds.valid
        rows = v[:, None, :].double()                                   # [B, 1, T]
        keys = lambda m: (a * m[:, None, None, :].double()).sum(-1)    # noqa: E731  [B, H, T]
        diag = torch.diagonal(a, dim1=-2, dim2=-1)                     # [B, H, T]
        prev = torch.zeros_like(diag)
        nxt = torch.zeros_like(diag)
        prev[..., 1:] = torch.diagonal(a, offset=-1, dim1=-2, dim2=-1)
        nxt[..., :-1] = torch.diagonal(a, offset=1, dim1=-2, dim2=-1)
        word = kinds.sentence >= 0                     # a real token that is not [CLS]/[SEP]
        has_prev = torch.zeros_like(v)
        has_prev[:, 1:] = word[:, :-1]
        has_next = torch.zeros_like(v)
        has_next[:, :-1] = word[:, 1:]
        per_row = {"cls": a[..., 0], "sep": keys(kinds.sep), "punct": keys(kinds.punct),
                   "entropy": torch.special.entr(a).sum(-1)}
        for name, value in per_row.items():
            self._add(name, layer, value, rows, v)
        for name, value, has in (("prev", prev, has_prev & v), ("next", nxt, has_next & v),
                                 ("self", diag, word)):
            self._add(name, layer, value, has[:, None, :].double(), has)
        same = kinds.sentence[:, :, None] == kinds.sentence[:, None, :]    # [B, T, T]
        same &= word[:, :, None] & word[:, None, :]
        chance = same.double().sum(-1) / v.double().sum(-1, keepdim=True).clamp(min=1)
        excess = (a * same[:, None].double()).sum(-1) - chance[:, None, :]
        self._add("sentence", layer, excess, word[:, None, :].double(), word)

    def _add(self, name, layer, value, weight, rows) -> None:
        self.sums[name][layer] += (value * weight).sum(dim=(0, 2)).cpu().numpy()
        self.counts[name][layer] += float(rows.sum())

    def means(self) -> dict[str, np.ndarray]:
        return {s: self.sums[s] / np.maximum(self.counts[s], 1)[:, None] for s in STATS}


def js_rows(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """Jensen–Shannon divergence in bits between the rows (last axis) of ``p`` and ``q``."""
    p, q = p.double(), q.double()
    m = 0.5 * (p + q)
    kl = lambda a: (torch.special.xlogy(a, a) - torch.special.xlogy(a, m)).sum(-1)  # noqa: E731
    return (0.5 * kl(p) + 0.5 * kl(q)).clamp(min=0) / np.log(2.0)


class Divergence:
    """Running mean of the per-row JS divergence between two models' attention, per head."""

    def __init__(self, layers: int, heads: int):
        self.sums = np.zeros((layers, heads))
        self.rows = np.zeros(layers)

    def add(self, layer: int, base: torch.Tensor, tuned: torch.Tensor, valid: torch.Tensor) -> None:
        js = js_rows(base, tuned)                                       # [B, H, T]
        w = valid[:, None, :].double()
        self.sums[layer] += (js * w).sum(dim=(0, 2)).cpu().numpy()
        self.rows[layer] += float(valid.sum())

    def means(self) -> np.ndarray:
        return self.sums / np.maximum(self.rows, 1)[:, None]


# ------------------------------------------------------------------ labels
def role(stats: dict) -> str:
    """The pattern one head's atlas numbers support (the rule in the module docstring)."""
    v = stats["cls"] + stats["sep"] + stats["punct"]
    d = stats["prev"] + stats["self"] + stats["next"]
    if v >= VERTICAL and d < BOTH_MIN:
        return "vertical"
    if d >= DIAGONAL and v < 0.3:
        return "diagonal"
    if v + d >= BOTH_SUM and v >= BOTH_MIN and d >= BOTH_MIN:
        return "vertical + diagonal"
    if stats["sentence"] >= BLOCK:
        return "block"
    return "heterogeneous"


def roles(atlas: dict[str, np.ndarray], alive: np.ndarray | None = None) -> list[list[str | None]]:
    """[layer][head] labels of a whole atlas (None where a head was removed)."""
    L, H = atlas["cls"].shape
    return [[role({s: float(atlas[s][li, h]) for s in STATS})
             if alive is None or alive[li, h] else None for h in range(H)] for li in range(L)]


def single(att: np.ndarray, tokens: list[str]) -> dict[str, float]:
    """The atlas numbers of one hand-made (or one review's) matrix [T, T]."""
    acc = Atlas(1, 1)
    acc.add(0, torch.as_tensor(np.asarray(att, dtype=np.float64))[None, None],
            TokenKinds.from_tokens(tokens))
    return {s: float(v[0, 0]) for s, v in acc.means().items()}
