"""What if? Edit a review and compare; counterfactuals the model itself confirms.

Two things a reader of a heatmap asks next, for the review on the screen:

- **Edit and compare** (:func:`compare`): the review and an edited copy, both predicted;
  the change per class, the words added and removed (``difflib`` on the words), and one
  explanation method's word scores for both with the change per word. :class:`History`
  keeps a few edits to compare against the original.
- **Counterfactuals** (:func:`counterfactuals`), three kinds:

  ======================  ==========================================================
  kind                    what is searched
  ======================  ==========================================================
  ``deletion``            the smallest set of words whose deletion changes the
                          predicted class: the top 1, 2, … words of an explanation's
                          ranking deleted (greedy, a chunk of prefixes per batch)
                          until the class changes, then words put back one at a time
                          while it stays changed (:func:`minimal_deletion`)
  ``sentence``            each sentence dropped in turn (:func:`sentence_occlusion`)
  ``hotflip``             single-wordpiece swaps ranked by the first-order change of
                          log p(neighbour) − log p(ŷ) through the embedding matrix
                          (Ebrahimi et al. 2018), then run through the model
                          (:func:`hotflip`)
  ======================  ==========================================================

Every counterfactual is a full text. Nothing is shown from an estimate: each one's
probabilities come from its own forward pass of that text, tokenised afresh exactly as
the Predict page tokenises a review (``Predictor.encode_rows``), in exact fp32
(:class:`Checker`), so anyone can re-check it with plain transformers.

Speed. The searches send their candidates through the model in batches
(``Predictor.batch_logits``) and, on a CPU with bf16 matrix units, in bf16 autocast
(``device.resolve_precision("auto")``, faster per row there; bench/whatif.py times both); what is
shown is then run again in fp32, and a deletion set that fp32 does not confirm is
searched again in fp32. ``Checker(one_at_a_time=True)`` does the same searches one exact
fp32 pass per candidate: the baseline of ``bench/whatif.py``.

Words. A deletion removes a word's characters from the text (leaving one space where it
would glue two words together), never punctuation-only words, which are not counted as
words. HotFlip swaps only words that are one wordpiece, for whole-word pieces: never
[CLS], [SEP], [PAD], [MASK], [UNK] or [unused…], never a ``##`` continuation (a word of
several pieces cannot be swapped piece by piece and stay one word), and a swap whose
text the tokenizer would not read back as exactly that one piece is dropped.
"""
from __future__ import annotations

import difflib
import functools
import re
import time
from dataclasses import dataclass, field

import numpy as np
import torch

from reviewbert.explain import methods as explain
from reviewbert.model.device import resolve_precision
from reviewbert.model.inference import softmax

MAX_WORDS = 10
"""The deletion flip gives up beyond this many words (the k of "no flip within k words")."""
PREFIX_CHUNK = 4
"""Prefixes of the ranking tried per batch: most flips need few words (a chunk of 4 is then
little waste), and short rows cost much less in company than alone."""
HOTFLIP_SHOW = 5
"""Swaps shown per neighbouring class."""
HOTFLIP_CANDIDATES = 16
"""First-order candidates run through the model per neighbouring class."""
HOTFLIP_PER_POSITION = 2
"""At most this many of them swap the same word (else one word takes all 16)."""
DEFAULT_METHOD = "value_norm"
"""Attention × value norm: instant (it reads the prediction's own pass), and the most
faithful of the attention methods on the demo (docs/guide/faithfulness.md)."""
HISTORY_SIZE = 8
VERIFY_MARGIN = 0.25
"""``Checker(verify="bf16")`` only: a row whose two largest logits are closer than this is
run again in fp32. On 600 demo test reviews bf16 autocast moved a logit by at most 0.038
(99th percentile 0.021), so a margin can move by at most ~0.08: 0.25 leaves room."""


# ------------------------------------------------------------------ texts
def is_word(word: str) -> bool:
    """A word to count and delete: it has a letter or digit (punctuation does not count)."""
    return any(ch.isalnum() for ch in word)


def apply_edits(text: str, edits) -> str:
    """``text`` with each (start, end, replacement) span replaced (spans sorted, not
    overlapping). A span deleted between two non-space characters leaves one space: *don't*
    without its apostrophe reads *don t* (the same pieces), not *dont* (another word)."""
    out: list[str] = []
    last, pos = "", 0
    for s, e, rep in sorted(edits):
        if s < pos:
            raise ValueError("edits overlap")
        piece = text[pos:s]
        if piece:
            out.append(piece)
            last = piece[-1]
        after = text[e:e + 1]
        if not rep and last and after and not last.isspace() and not after.isspace():
            rep = " "
        if rep:
            out.append(rep)
            last = rep[-1]
        pos = e
    out.append(text[pos:])
    return "".join(out)


def delete_words(pred, words) -> str:
    """The prediction's text without the words at indices ``words``."""
    return apply_edits(pred.text, [(*pred.word_spans[i], "") for i in words])


_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]]*(?=\s|$)|\n")


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence: ends at ., !, ? or … (and closing quotes or brackets)
    before a space, or at a line break; surrounding spaces trimmed; a piece without a
    letter or digit ("!!!", ":)") joins the sentence before it. A regular expression, not
    a trained splitter (nltk's punkt needs a download): "e.g. this" splits after "e.g."."""
    cuts = [0] + [m.end() for m in _SENTENCE_END.finditer(text)] + [len(text)]
    spans: list[tuple[int, int]] = []
    for a, b in zip(cuts, cuts[1:]):
        piece = text[a:b]
        s = a + len(piece) - len(piece.lstrip())
        e = b - (len(piece) - len(piece.rstrip()))
        if e <= s:
            continue
        if not is_word(text[s:e]) and spans:
            spans[-1] = (spans[-1][0], e)
        elif is_word(text[s:e]):
            spans.append((s, e))
    return spans


# ------------------------------------------------------------------ the model's word
@dataclass
class Verified:
    """A text and what one forward pass of the model made of it."""
    text: str
    probs: np.ndarray
    precision: str = "fp32"

    @property
    def label_id(self) -> int:
        return int(np.argmax(self.probs))


class Checker:
    """Texts → class probabilities through ``predictor``: :meth:`search` for the searches'
    candidates (batched, ``search`` precision), :meth:`verify` for what is shown (exact
    fp32; ``verify="bf16"`` runs bf16 and re-runs near ties in fp32). Results are kept per
    (text, precision), and ``passes`` counts the texts actually run.

    ``one_at_a_time``: every text alone through the exact single-review pass (the fast
    path the Predict page's prediction takes, logits only), search and verification
    alike: the same searches without batching or bf16, for the benchmark."""

    def __init__(self, predictor, search: str = "auto", verify: str = "fp32",
                 one_at_a_time: bool = False):
        self.predictor, self.one_at_a_time = predictor, one_at_a_time
        self.search_precision = "fp32" if one_at_a_time else resolve_precision(search, predictor.device)
        self.verify_precision = "fp32" if one_at_a_time else verify
        self.memo: dict[tuple[str, str], np.ndarray] = {}
        self.passes = {"search": 0, "verify": 0}

    def _probs(self, texts: list[str], precision: str, what: str, rows=None) -> np.ndarray:
        todo = list(dict.fromkeys(t for t in texts if (t, precision) not in self.memo))
        if todo:
            known = dict(zip(texts, rows)) if rows is not None else {}
            rows = ([known[t] for t in todo] if known else self.predictor.encode_rows(todo))
            if self.one_at_a_time:
                logits = np.stack([self._one(r) for r in rows])
            else:
                logits = self.predictor.batch_logits(rows, precision)
            for t, p in zip(todo, softmax(logits.astype(np.float64))):
                self.memo[(t, precision)] = p
            self.passes[what] += len(todo)
        n = self.predictor.scheme.num_labels
        return np.stack([self.memo[(t, precision)] for t in texts]) if texts else np.zeros((0, n))

    @torch.inference_mode()
    def _one(self, row: list[int]) -> np.ndarray:
        p = self.predictor
        if p.fast is None:
            return p.batch_logits([row])[0]
        logits, _ = p.fast(torch.tensor(row, dtype=torch.long, device=p.device))
        return logits.float().cpu().numpy()

    def search(self, texts: list[str], rows: list[list[int]] | None = None) -> np.ndarray:
        """``rows``: the texts' token ids when the caller has them already (else encoded)."""
        return self._probs(texts, self.search_precision, "search", rows)

    def verify(self, texts: list[str]) -> list[Verified]:
        if self.verify_precision == "fp32":
            return [Verified(t, p) for t, p in zip(texts, self._probs(texts, "fp32", "verify"))]
        probs = self._probs(texts, "bf16", "verify")
        out = []
        for t, p in zip(texts, probs):
            top2 = np.sort(np.log(np.maximum(p, 1e-30)))[-2:]
            near = len(top2) > 1 and top2[1] - top2[0] < VERIFY_MARGIN
            out.append(Verified(t, self._probs([t], "fp32", "verify")[0], "fp32") if near
                       else Verified(t, p, "bf16"))
        return out


# ------------------------------------------------------------------ counterfactuals
@dataclass
class Counterfactual:
    """One edited text and its own forward pass."""
    kind: str                         # "deletion" | "sentence" | "hotflip"
    text: str
    probs: np.ndarray                 # from this text's own pass
    original_label_id: int
    what: str                         # in plain words, e.g. "deleted: poor, quality"
    edits: list[tuple[int, int, str]]  # spans of the original text and what replaced them
    precision: str = "fp32"
    estimate: float | None = None     # HotFlip: the first-order guess it was chosen by

    @property
    def label_id(self) -> int:
        return int(np.argmax(self.probs))

    @property
    def flipped(self) -> bool:
        return self.label_id != self.original_label_id

    def to_json(self, scheme) -> dict:
        """What the CLI prints: enough to re-check it with plain transformers."""
        k = self.label_id
        return {"kind": self.kind, "text": self.text, "what": self.what,
                "label": scheme.names[k], "label_id": k, "stars": list(scheme.stars_of(k)),
                "changed": self.flipped, "precision": self.precision,
                "probabilities": {n: round(float(p), 6) for n, p in zip(scheme.names, self.probs)},
                "edits": [[int(s), int(e), r] for s, e, r in self.edits]}


def _counterfactual(kind, v: Verified, pred, what, edits, estimate=None) -> Counterfactual:
    return Counterfactual(kind, v.text, np.asarray(v.probs, dtype=np.float64),
                          int(pred.label_id), what, list(edits), v.precision, estimate)


def _quote_words(pred, idx) -> str:
    return ", ".join(pred.words[i] for i in sorted(idx))


# ------------------------------------------------------------------ 1. deletion flip
@dataclass
class DeletionFlip:
    found: bool
    words: list[int]                  # word indices of the prediction, reading order
    counterfactual: Counterfactual | None
    max_words: int
    method: str                       # the ranking's method name
    candidates: int                   # words the greedy pass could delete
    seconds: float = 0.0

    def sentence(self, pred) -> str:
        """"Deleting these 3 words turns 4 stars into 3 stars." (plain text)"""
        if not self.found:
            return (f"No flip within {min(self.max_words, self.candidates)} words: deleting the "
                    f"top {min(self.max_words, self.candidates)} words of the "
                    f"{explain.LABELS.get(self.method, self.method)} ranking leaves "
                    f"{pred.label}.")
        n = len(self.words)
        names = pred.scheme.names if pred.scheme else None
        new = names[self.counterfactual.label_id] if names else str(self.counterfactual.label_id)
        these = "this word" if n == 1 else f"these {n} words"
        return f"Deleting {these} turns {pred.label} into {new}: {_quote_words(pred, self.words)}."


def ranking(predictor, pred, method: str = DEFAULT_METHOD) -> np.ndarray:
    """Word indices, most important for the predicted class first, by one method."""
    return explain.ranking(explain.method_by_name(method).run(predictor, pred).scores)


def _first_flip(checker, pred, cand: list[int], chunk: int) -> int | None:
    """Smallest k such that deleting cand[:k] changes the class, trying ``chunk`` k's a batch."""
    for start in range(0, len(cand), chunk):
        ks = list(range(start + 1, min(start + chunk, len(cand)) + 1))
        probs = checker.search([delete_words(pred, cand[:k]) for k in ks])
        hits = [k for k, p in zip(ks, probs) if int(np.argmax(p)) != pred.label_id]
        if hits:
            return hits[0]
    return None


def _prune(checker, pred, words: list[int]) -> list[int]:
    """Put words back one at a time while the class stays changed: each round tries every
    word of the set in one batch and restores the one that leaves the change most secure."""
    words = list(words)
    while len(words) > 1:
        trials = [[w for w in words if w != x] for x in words]
        probs = checker.search([delete_words(pred, t) for t in trials])
        y = pred.label_id
        margin = [float(np.max(np.delete(p, y)) - p[y]) if int(np.argmax(p)) != y else -np.inf
                  for p in probs]
        best = int(np.argmax(margin))
        if not np.isfinite(margin[best]):
            break
        words = trials[best]
    return sorted(words)


def minimal_deletion(checker, pred, order, method: str = DEFAULT_METHOD,
                     max_words: int = MAX_WORDS, chunk: int = PREFIX_CHUNK) -> DeletionFlip:
    """The deletion flip of ``pred`` along the ranking ``order`` (see the module docstring).
    The set is 1-minimal (no word of it can be put back and keep the change), not
    necessarily the smallest of all sets, and never every word of the review (a review
    with nothing left is not a counterfactual of it)."""
    t0 = time.perf_counter()
    words = [int(i) for i in order if is_word(pred.words[int(i)])]
    cand = words[:min(max(1, int(max_words)), len(words) - 1)]   # at least one word stays
    flip = DeletionFlip(False, [], None, int(max_words), method, len(cand))
    k = _first_flip(checker, pred, cand, chunk)
    if k is not None:
        words = _prune(checker, pred, cand[:k])
        v = checker.verify([delete_words(pred, words)])[0]
        if v.label_id == pred.label_id and checker.search_precision != "fp32":
            # bf16 said it flips, fp32 says no: search again with exact passes only
            exact = Checker(checker.predictor, search="fp32", verify="fp32")
            exact.memo = checker.memo
            again = minimal_deletion(exact, pred, order, method, max_words, chunk)
            checker.passes["search"] += exact.passes["search"]
            checker.passes["verify"] += exact.passes["verify"]
            again.seconds = time.perf_counter() - t0
            return again
        if v.label_id != pred.label_id:
            cf = _counterfactual("deletion", v, pred, f"deleted: {_quote_words(pred, words)}",
                                 [(*pred.word_spans[i], "") for i in words])
            flip = DeletionFlip(True, words, cf, int(max_words), method, len(cand))
    flip.seconds = time.perf_counter() - t0
    return flip


# ------------------------------------------------------------------ 2. sentence occlusion
@dataclass
class SentenceOcclusion:
    spans: list[tuple[int, int]]          # the sentences dropped, in reading order
    sentences: list[str]
    drops: list[Counterfactual]           # the review without each sentence
    base: np.ndarray                      # the review's own probabilities
    unread: int = 0                       # sentences after the model's last token
    seconds: float = 0.0

    @property
    def deltas(self) -> np.ndarray:
        """[sentences, classes]: p(class | without sentence i) − p(class | review)."""
        if not self.drops:
            return np.zeros((0, len(self.base)))
        return np.stack([d.probs for d in self.drops]) - self.base[None]


def sentence_occlusion(checker, pred) -> SentenceOcclusion:
    """Each sentence the model read dropped in turn, every one run through the model (these
    are all shown, so the passes are the verified ones)."""
    t0 = time.perf_counter()
    spans = sentence_spans(pred.text)
    read_end = pred.word_spans[-1][1] if pred.word_spans else 0
    read = [sp for sp in spans if sp[0] < read_end]
    if len(read) < 2 and len(spans) < 2:
        read = []                         # one sentence: dropping it leaves nothing to read
    texts = [apply_edits(pred.text, [(s, e, "")]) for s, e in read]
    drops = [_counterfactual("sentence", v, pred, f"without sentence {i + 1}", [(s, e, "")])
             for i, ((s, e), v) in enumerate(zip(read, checker.verify(texts)))]
    return SentenceOcclusion(read, [pred.text[s:e] for s, e in read], drops,
                             np.asarray(pred.probs, dtype=np.float64), len(spans) - len(read),
                             time.perf_counter() - t0)


# ------------------------------------------------------------------ 3. HotFlip
HOTFLIP_RULES = ("Only words that are one wordpiece are swapped, each for one whole-word "
                 "piece of the vocabulary: never [CLS], [SEP], [PAD], [MASK], [UNK] or "
                 "[unused…], and never a ## continuation piece (a word of several pieces "
                 "cannot be swapped piece by piece and stay one word).")


@dataclass
class HotFlip:
    by_class: dict[int, list[Counterfactual]]   # neighbouring class → up to 5 swaps, best first
    positions: int                              # words that could be swapped
    scored: int                                 # (word, replacement) pairs ranked by the gradient
    tried: int                                  # candidates run through the model
    dropped: int                                # swaps the tokenizer would not read back as one piece
    seconds: float = 0.0


@functools.lru_cache(maxsize=4)
def _replacement_vocab(tokenizer) -> tuple[torch.Tensor, list[str]]:
    """([V] bool: the whole-word pieces a word may become, no specials, [unused…] or ##;
    every piece's text)."""
    tokens = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    special = set(tokenizer.all_special_ids)
    ok = [i not in special and t is not None and not t.startswith("##")
          and not (t.startswith("[") and t.endswith("]")) and t.strip() == t and t != ""
          for i, t in enumerate(tokens)]
    return torch.tensor(ok, dtype=torch.bool), tokens


def single_piece_positions(pred) -> list[int]:
    """Token positions of the words that are exactly one wordpiece."""
    counts = np.bincount([w for w in pred.word_ids if w is not None], minlength=len(pred.words))
    return [i for i, w in enumerate(pred.word_ids) if w is not None and counts[w] == 1]


def _first_order(predictor, ids: list[int], target: int, toward: list[int]) -> list[torch.Tensor]:
    """For each class c in ``toward``: [T, V], the first-order change of
    logit_c − logit_target when token t becomes v: (E_v − E_{x_t}) · ∂/∂e_t."""
    W = predictor.model.get_input_embeddings().weight.detach()
    out = []
    with torch.inference_mode(False), torch.enable_grad():
        x = W[torch.tensor(ids, device=W.device)].clone().requires_grad_()
        logits = predictor.embedded_logits(x[None])[0].float()
        for i, c in enumerate(toward):
            g, = torch.autograd.grad(logits[c] - logits[target], x, retain_graph=i < len(toward) - 1)
            g = g.float()
            out.append(g @ W.float().T - (g * x.detach().float()).sum(-1, keepdim=True))
    return out


def _candidates(scores: torch.Tensor, allowed_pos: list[int], vocab: torch.Tensor,
                ids: list[int], n: int, per_position: int) -> list[tuple[int, int, float]]:
    """The ``n`` best (position, token, estimate) pairs, at most ``per_position`` a word."""
    s = scores.clone()
    s[:, ~vocab] = -torch.inf
    keep = torch.zeros(s.shape[0], dtype=torch.bool)
    keep[allowed_pos] = True
    s[~keep] = -torch.inf
    s[torch.arange(len(ids)), torch.tensor(ids)] = -torch.inf     # no swap for itself
    k = min(per_position, s.shape[1])
    val, tok = torch.topk(s, k, dim=1)
    flat = [(int(p), int(tok[p, j]), float(val[p, j])) for p in allowed_pos for j in range(k)]
    flat = [c for c in flat if np.isfinite(c[2])]
    return sorted(flat, key=lambda c: -c[2])[:n]


def hotflip(checker, pred, show: int = HOTFLIP_SHOW, n_candidates: int = HOTFLIP_CANDIDATES,
            per_position: int = HOTFLIP_PER_POSITION) -> HotFlip:
    """The swaps that move the rating most towards each neighbouring class (see the module
    docstring): ranked by the gradient, run through the model, the best ``show`` verified."""
    t0 = time.perf_counter()
    predictor = checker.predictor
    ids = explain.token_ids(predictor, pred)
    y, n_cls = int(pred.label_id), predictor.scheme.num_labels
    toward = [c for c in (y - 1, y + 1) if 0 <= c < n_cls]
    positions = single_piece_positions(pred)
    result = HotFlip({c: [] for c in toward}, len(positions), 0, 0, 0)
    if not positions or not toward:
        result.seconds = time.perf_counter() - t0
        return result
    vocab, tokens = _replacement_vocab(predictor.tokenizer)
    for c, scores in zip(toward, _first_order(predictor, ids, y, toward)):
        result.scored += len(positions) * int(vocab.sum())
        cands = _candidates(scores.cpu(), positions, vocab, ids, n_candidates, per_position)
        result.by_class[c] = _verified_swaps(checker, pred, ids, cands, tokens, c, show, result)
    result.seconds = time.perf_counter() - t0
    return result


def _verified_swaps(checker, pred, ids, cands, tokens, toward: int, show: int,
                    result: HotFlip) -> list[Counterfactual]:
    edits = [(pos, tok, est, *pred.word_spans[pred.word_ids[pos]]) for pos, tok, est in cands]
    every = [apply_edits(pred.text, [(s, e, tokens[tok])]) for _, tok, _, s, e in edits]
    texts, rows, kept = [], [], []
    for text, row, (pos, tok, est, s, e) in zip(every, checker.predictor.encode_rows(every), edits):
        if row != ids[:pos] + [tok] + ids[pos + 1:]:
            result.dropped += 1            # the tokenizer would read something else
            continue
        texts.append(text)
        rows.append(row)
        kept.append((pos, tok, est, s, e))
    result.tried += len(texts)
    probs = checker.search(texts, rows)
    gain = probs[:, toward] - pred.probs[toward] if len(texts) else np.zeros(0)
    best = [int(i) for i in np.argsort(-gain, kind="stable")[:show]]
    verified = checker.verify([texts[i] for i in best])
    out = []
    for i, v in zip(best, verified):
        pos, tok, est, s, e = kept[i]
        what = f"{pred.words[pred.word_ids[pos]]} → {tokens[tok]}"
        out.append(_counterfactual("hotflip", v, pred, what, [(s, e, tokens[tok])], est))
    return sorted(out, key=lambda cf: -(cf.probs[toward] - pred.probs[toward]))


# ------------------------------------------------------------------ all three
@dataclass
class Counterfactuals:
    deletion: DeletionFlip
    sentences: SentenceOcclusion
    hotflip: HotFlip
    passes: dict = field(default_factory=dict)
    seconds: float = 0.0

    def all(self) -> list[Counterfactual]:
        out = [self.deletion.counterfactual] if self.deletion.counterfactual else []
        out += self.sentences.drops
        for swaps in self.hotflip.by_class.values():
            out += swaps
        return out

    def to_json(self, pred) -> dict:
        """The CLI's object: the original prediction and every counterfactual."""
        scheme = pred.scheme
        k = int(pred.label_id)
        return {"text": pred.text, "label": pred.label, "label_id": k,
                "stars": list(scheme.stars_of(k)), "max_length": pred.max_length,
                "recheck": RECHECK,
                "probabilities": {n: round(float(p), 6) for n, p in zip(scheme.names, pred.probs)},
                "deletion": {"found": self.deletion.found,
                             "words": [pred.words[i] for i in self.deletion.words],
                             "max_words": self.deletion.max_words, "ranked_by": self.deletion.method,
                             "sentence": self.deletion.sentence(pred)},
                "hotflip_rules": HOTFLIP_RULES,
                "counterfactuals": [cf.to_json(scheme) for cf in self.all()],
                "passes": dict(self.passes), "seconds": round(self.seconds, 3)}


RECHECK = ("AutoModelForSequenceClassification.from_pretrained(CHECKPOINT, dtype=torch.float32, "
           "use_safetensors=True) "
           "on tokenizer(text, truncation=True, max_length=max_length): the same class, "
           "probabilities within 1e-5 (fp32 weights: a float16 checkpoint run in float16 moves "
           "them by ~1e-3)")


def counterfactuals(predictor, pred, method: str = DEFAULT_METHOD, max_words: int = MAX_WORDS,
                    checker: Checker | None = None, order=None, progress=None) -> Counterfactuals:
    """All three kinds for one prediction. ``progress(step, of, what)`` after each kind."""
    t0 = time.perf_counter()
    checker = checker or Checker(predictor)
    order = ranking(predictor, pred, method) if order is None else order
    deletion = minimal_deletion(checker, pred, order, method, max_words)
    if progress:
        progress(1, 3, "deletion flip")
    sentences = sentence_occlusion(checker, pred)
    if progress:
        progress(2, 3, "sentence occlusion")
    flips = hotflip(checker, pred)
    if progress:
        progress(3, 3, "HotFlip")
    return Counterfactuals(deletion, sentences, flips, dict(checker.passes), time.perf_counter() - t0)


# ------------------------------------------------------------------ edit and compare
@dataclass
class WordChange:
    """One difflib opcode over the words: ``op`` equal/delete/insert/replace, the word
    indices it covers in the original (``old``) and in the edit (``new``)."""
    op: str
    old: list[int]
    new: list[int]


def diff_words(before: list[str], after: list[str]) -> list[WordChange]:
    """Word-level diff (``difflib.SequenceMatcher``, no junk heuristic)."""
    sm = difflib.SequenceMatcher(None, list(before), list(after), autojunk=False)
    return [WordChange(op, list(range(i1, i2)), list(range(j1, j2)))
            for op, i1, i2, j1, j2 in sm.get_opcodes()]


@dataclass
class TextDiff:
    """Two whole texts' words (every word, past the model's window too) and their diff."""
    before: str
    after: str
    before_spans: list[tuple[int, int]]
    after_spans: list[tuple[int, int]]
    changes: list[WordChange]

    @property
    def added(self) -> int:
        return sum(len(c.new) for c in self.changes if c.op in ("insert", "replace"))

    @property
    def removed(self) -> int:
        return sum(len(c.old) for c in self.changes if c.op in ("delete", "replace"))


def text_diff(tokenizer, before: str, after: str) -> TextDiff:
    """The word diff of two texts, words as the tokenizer splits them (punctuation apart)."""
    from reviewbert.model.inference import MAX_CHARS, encode
    a = encode(tokenizer, before, MAX_CHARS)
    b = encode(tokenizer, after, MAX_CHARS)
    return TextDiff(a.text, b.text, a.word_spans, b.word_spans, diff_words(a.words, b.words))


@dataclass
class Comparison:
    before: object                    # Prediction of the original
    after: object                     # Prediction of the edit
    changes: list[WordChange]
    before_scores: explain.TokenScores | None = None
    after_scores: explain.TokenScores | None = None

    @property
    def delta(self) -> np.ndarray:
        """p(class | edit) − p(class | original), per class."""
        after, before = (np.asarray(p.probs, dtype=np.float64) for p in (self.after, self.before))
        return after - before

    @property
    def added(self) -> int:
        return sum(len(c.new) for c in self.changes if c.op in ("insert", "replace"))

    @property
    def removed(self) -> int:
        return sum(len(c.old) for c in self.changes if c.op in ("delete", "replace"))

    def word_rows(self) -> list[dict]:
        """Per word, in the edit's order with removed words where they were: {"word", "op"
        ("kept", "removed", "added"), "before", "after", "change"} (scores None when absent)."""
        b = None if self.before_scores is None else self.before_scores.scores
        a = None if self.after_scores is None else self.after_scores.scores
        rows = []
        for c in self.changes:
            if c.op == "equal":
                for i, j in zip(c.old, c.new):
                    rows.append(_row(self.after.words[j], "kept", b, i, a, j))
                continue
            rows += [_row(self.before.words[i], "removed", b, i, None, None) for i in c.old]
            rows += [_row(self.after.words[j], "added", None, None, a, j) for j in c.new]
        return rows


def _row(word, op, b, i, a, j) -> dict:
    before = None if b is None or i is None else float(b[i])
    after = None if a is None or j is None else float(a[j])
    change = (after if after is not None else 0.0) - (before if before is not None else 0.0) \
        if (before is not None or after is not None) else None
    return {"word": word, "op": op, "before": before, "after": after, "change": change}


def compare(predictor, before, after, method: str | None = DEFAULT_METHOD,
            layer: int | None = None, head: int | None = None, progress=None,
            on_wait=None) -> Comparison:
    """Both predictions, the word diff and (``method`` not None) that method's scores of both,
    each read from the explanation cache where any page or session computed it, else
    computed and cached (reviewbert/explain/cache.py: ``on_wait()`` while another
    thread computes the same); ``progress(n)`` with the wordpieces the method's passes read
    (:func:`compare_cost`)."""
    from reviewbert.explain import cache as explanation_cache
    cmp = Comparison(before, after, diff_words(before.words, after.words))
    if method:
        m = explain.method_by_name(method, layer, head)
        cmp.before_scores, cmp.after_scores = (
            explanation_cache.scores(predictor, p, m, progress, on_wait).results[0]
            for p in (before, after))
    return cmp


def compare_cost(before, after, method: str | None, layer: int | None = None,
                 head: int | None = None, predictor=None) -> int:
    """Wordpieces :func:`compare` has the model read (0: the method reads attentions only);
    given the ``predictor``, a version whose scores are cached costs nothing."""
    if not method:
        return 0
    from reviewbert.explain import cache as explanation_cache
    m = explain.method_by_name(method, layer, head)
    return sum(m.cost(p) for p in (before, after)
               if predictor is None or explanation_cache.stored(predictor, p, m) is None)


@dataclass
class Edit:
    """One kept edit: its text and what the model said (no attentions: small to keep)."""
    text: str
    probs: np.ndarray
    label: str
    added: int
    removed: int

    @property
    def label_id(self) -> int:
        return int(np.argmax(self.probs))


class History:
    """The last ``size`` edits of one original review, newest first; the same text once."""

    def __init__(self, original: str, size: int = HISTORY_SIZE):
        self.original, self.size, self.edits = original, int(size), []

    def add(self, cmp: Comparison) -> Edit:
        edit = Edit(cmp.after.text, np.asarray(cmp.after.probs, dtype=np.float64), cmp.after.label,
                    cmp.added, cmp.removed)
        self.edits = [edit] + [e for e in self.edits if e.text != edit.text]
        del self.edits[self.size:]
        return edit

    def __len__(self) -> int:
        return len(self.edits)

    def rows(self, scheme, original_probs) -> list[dict]:
        """One row per edit for a table: rating, p(rating), change of the original class."""
        y = int(np.argmax(original_probs))
        return [{"edit": i + 1, "rating": e.label, "p": float(e.probs[e.label_id]),
                 f"Δ p({scheme.names[y]})": float(e.probs[y] - original_probs[y]),
                 "words +": e.added, "words −": e.removed, "text": e.text}
                for i, e in enumerate(self.edits)]
