"""The named perturbations an INV or DIR test applies to a text, each deterministic for a seed.

A perturbation is ``fn(text, rng, lexicons, **params) -> str | None``: the changed text,
or None when it does not apply to this text (no brand to swap, no number to change).
``rng`` is a :class:`random.Random` that the caller seeded; nothing here reads Python's
or numpy's global random state, except ``typos`` (see :func:`typos`), which seeds and
restores them under a lock.

:data:`PERTURBATIONS` maps each name to its :class:`Perturbation`: the function, a line
of documentation, its parameters' defaults (a suite may give only those parameters, of
the same types) and a check of the parameters against the suite's lexicons.
"""
from __future__ import annotations

import random
import re
import string
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

Lexicons = Mapping[str, tuple[str, ...]]


@dataclass(frozen=True)
class Perturbation:
    """One named perturbation: its function, documentation and parameters' defaults."""

    name: str
    fn: Callable[..., str | None]
    doc: str
    params: dict = field(default_factory=dict)
    # params, lexicons -> why they are wrong (one line), or None
    check: Callable[[Mapping, Lexicons], str | None] | None = None


# ------------------------------------------------------------------------- typos
_TYPO_LOCK = threading.Lock()
_AUGMENTERS: dict[tuple[int, int], object] = {}


def _keyboard(words: int, chars: int):
    """nlpaug's KeyboardAug for these sizes, made once (it reads its keyboard map from disk)."""
    key = (words, chars)
    if key not in _AUGMENTERS:
        # imported here: nlpaug pulls in its augmenter families, which only typos needs
        import nlpaug.augmenter.char as nac
        _AUGMENTERS[key] = nac.KeyboardAug(
            aug_word_min=1, aug_word_max=words, aug_char_min=1, aug_char_max=chars,
            include_special_char=False, include_numeric=False, include_upper_case=False)
    return _AUGMENTERS[key]


def typos(text: str, rng: random.Random, lexicons: Lexicons, words: int = 2,
          chars: int = 1) -> str | None:
    """Keyboard typos (a key's neighbour) in up to ``words`` words, ``chars`` each (nlpaug).

    nlpaug draws from Python's global ``random`` and numpy's global RNG, with no way to
    pass a generator. To make a typo a function of ``rng`` alone, both global states are
    seeded from ``rng`` and restored afterwards, under a lock so that two threads (two
    sessions of the app) cannot interleave their draws."""
    import numpy as np
    seed = rng.getrandbits(32)
    aug = _keyboard(int(words), int(chars))
    with _TYPO_LOCK:
        py_state, np_state = random.getstate(), np.random.get_state()
        try:
            random.seed(seed)
            np.random.seed(seed)
            out = aug.augment(text)
        finally:
            random.setstate(py_state)
            np.random.set_state(np_state)
    if isinstance(out, list):
        out = out[0] if out else None
    # nlpaug joins words with single spaces: a text it left alone comes back respaced
    if not out or " ".join(out.split()) == " ".join(text.split()):
        return None
    return out


def _check_typos(params: Mapping, lexicons: Lexicons) -> str | None:
    if not 1 <= params.get("words", 2) <= 20:
        return "words must be 1–20"
    if not 1 <= params.get("chars", 1) <= 5:
        return "chars must be 1–5"
    return None


# ------------------------------------------------------------- punctuation, case
_TRAILING = re.compile(r"[\s" + re.escape(string.punctuation) + r"…]+$")
_ENDINGS = ("!", ".", "!!", "...")


def strip_punctuation(text: str, rng: random.Random, lexicons: Lexicons) -> str | None:
    """The trailing punctuation removed ("Great phone!" → "Great phone")."""
    out = _TRAILING.sub("", text)
    return out if out and out != text else None


def add_punctuation(text: str, rng: random.Random, lexicons: Lexicons) -> str | None:
    """Another ending: the trailing punctuation replaced by "!", ".", "!!" or "..."."""
    body = _TRAILING.sub("", text)
    if not body:
        return None
    ending = text[len(body):].strip()
    return body + rng.choice([e for e in _ENDINGS if e != ending])


def lowercase(text: str, rng: random.Random, lexicons: Lexicons) -> str | None:
    """The whole text in lower case."""
    out = text.lower()
    return out if out != text else None


def uppercase(text: str, rng: random.Random, lexicons: Lexicons) -> str | None:
    """The whole text in upper case."""
    out = text.upper()
    return out if out != text else None


# ------------------------------------------------------------------ contractions
CONTRACTIONS = (
    ("do not", "don't"), ("does not", "doesn't"), ("did not", "didn't"), ("is not", "isn't"),
    ("are not", "aren't"), ("was not", "wasn't"), ("were not", "weren't"),
    ("have not", "haven't"), ("has not", "hasn't"), ("had not", "hadn't"),
    ("will not", "won't"), ("would not", "wouldn't"), ("could not", "couldn't"),
    ("should not", "shouldn't"), ("cannot", "can't"), ("it is", "it's"), ("that is", "that's"),
    ("there is", "there's"), ("what is", "what's"), ("I am", "I'm"), ("I have", "I've"),
    ("I will", "I'll"), ("I would", "I'd"), ("you are", "you're"), ("we are", "we're"),
    ("they are", "they're"), ("he is", "he's"), ("she is", "she's"),
)
"""(long form, contraction): ``contract`` reads left to right, ``expand`` right to left."""


def _same_case(found: str, new: str) -> str:
    """``new`` with the first letter's case of ``found`` ("Do not" → "Don't")."""
    if found.isupper() and len(found) > 1 and not new.startswith("I'"):
        return new.upper()
    if found[:1].isupper():
        return new[:1].upper() + new[1:]
    return new[:1].lower() + new[1:] if not new.startswith("I") else new


def _table_sub(text: str, pairs: list[tuple[str, str]]) -> str | None:
    """Every whole-word, case-insensitive match of a pair's first form replaced by its second."""
    table = {a.lower(): b for a, b in pairs}
    pattern = re.compile(r"(?<![\w'’])(?:" + "|".join(
        re.escape(a).replace("'", "['’]").replace(r"\ ", r"\s+")
        for a in sorted(table, key=len, reverse=True)) + r")(?![\w'’])", re.IGNORECASE)

    def swap(m: re.Match) -> str:
        key = " ".join(m.group().replace("’", "'").lower().split())
        return _same_case(m.group(), table[key])
    out = pattern.sub(swap, text)
    return out if out != text else None


def contract(text: str, rng: random.Random, lexicons: Lexicons) -> str | None:
    """Long forms contracted ("do not" → "don't", "it is" → "it's")."""
    return _table_sub(text, list(CONTRACTIONS))


def expand(text: str, rng: random.Random, lexicons: Lexicons) -> str | None:
    """Contractions expanded ("don't" → "do not", "can't" → "cannot")."""
    return _table_sub(text, [(b, a) for a, b in CONTRACTIONS])


# ------------------------------------------------------------ added text: noise
_DOMAINS = ("example.com", "shop.example.org", "reviews.example.net", "t.example.co")


def _token(rng: random.Random, n: int, alphabet: str = string.ascii_lowercase + string.digits) -> str:
    return "".join(rng.choice(alphabet) for _ in range(n))


def _join(text: str, extra: str, where: str) -> str:
    """``extra`` before or after ``text``, as a sentence of its own."""
    text = text.strip()
    if where == "start":
        return f"{extra} {text}"
    sep = " " if not text or text[-1] in ".!?…" else ". "
    return f"{text}{sep}{extra}"


def add_url(text: str, rng: random.Random, lexicons: Lexicons, where: str = "end") -> str | None:
    """A made-up link added ("https://example.com/p/x7k2q9"); the model should not care."""
    url = f"https://{rng.choice(_DOMAINS)}/{rng.choice(('p', 'item', 'dp'))}/{_token(rng, 6)}"
    return _join(text, url, where)


def add_order_number(text: str, rng: random.Random, lexicons: Lexicons,
                     where: str = "end") -> str | None:
    """A made-up order number added ("Order #123-4567890-1234567.")."""
    digits = string.digits
    number = f"{_token(rng, 3, digits)}-{_token(rng, 7, digits)}-{_token(rng, 7, digits)}"
    form = rng.choice(("Order #{}.", "(order {})", "Order number: {}."))
    return _join(text, form.format(number), where)


def _words_of(source, lexicons: Lexicons) -> tuple[str, ...]:
    """A parameter that names a lexicon or lists its own words."""
    if isinstance(source, str):
        return tuple(lexicons.get(source, ()))
    return tuple(source or ())


def add_sentence(text: str, rng: random.Random, lexicons: Lexicons, sentences="",
                 where: str = "end") -> str | None:
    """A sentence drawn from ``sentences`` (a lexicon's name, or a list) added at the
    start or the end: neutral for INV, clearly positive or negative for DIR."""
    pool = _words_of(sentences, lexicons)
    if not pool:
        return None
    return _join(text, rng.choice(pool), where)


def _check_where(params: Mapping, lexicons: Lexicons) -> str | None:
    if params.get("where", "end") not in ("start", "end"):
        return "where must be start or end"
    return None


def _check_sentences(params: Mapping, lexicons: Lexicons) -> str | None:
    source = params.get("sentences")
    if isinstance(source, str):
        if source not in lexicons:
            return f"sentences names no lexicon: {source[:60]!r}"
    elif not source:
        return "sentences must name a lexicon or list sentences"
    return _check_where(params, lexicons)


# ----------------------------------------------------------------- swaps, numbers
def _lexicon_pattern(words: tuple[str, ...]) -> re.Pattern:
    """Whole-word, case-insensitive matches of any of ``words``, longest first (so that
    "New York City" wins over "New York")."""
    alts = "|".join(re.escape(w) for w in sorted(set(words), key=len, reverse=True))
    return re.compile(r"(?<!\w)(?:" + alts + r")(?!\w)", re.IGNORECASE)


def swap(text: str, rng: random.Random, lexicons: Lexicons, lexicon: str = "") -> str | None:
    """A word of ``lexicon`` found in the text (every occurrence of it) replaced by another
    word of the same lexicon (a brand by a brand, a name by a name, a place by a place),
    the first letter's case kept (a word in capitals stays in capitals, a lowercase one
    lowercase)."""
    words = tuple(w for w in lexicons.get(lexicon, ()) if w.strip())
    if len(words) < 2:
        return None
    pattern = _lexicon_pattern(words)
    found = sorted({m.group().lower() for m in pattern.finditer(text)})
    if not found:
        return None
    old = rng.choice(found)
    new = rng.choice([w for w in words if w.lower() != old] or [None])
    if new is None:
        return None

    def replace(m: re.Match) -> str:
        if m.group().lower() != old:
            return m.group()
        found = m.group()
        if len(found) > 1 and found.isupper():
            return new.upper()                  # SAMSUNG → NOKIA
        if found.islower():
            return new.lower()                  # samsung → zte, not zTE
        first = found[0]
        return (new[0].upper() if first.isupper() else new[0].lower() if first.islower()
                else new[0]) + new[1:]
    return pattern.sub(replace, text)


def _check_lexicon(params: Mapping, lexicons: Lexicons) -> str | None:
    name = params.get("lexicon", "")
    if name not in lexicons:
        return f"lexicon names no lexicon of the suite: {name[:60]!r}"
    if len(set(w.lower() for w in lexicons[name])) < 2:
        return f"lexicon {name[:60]!r} needs at least two words to swap"
    return None


# a count, not a rating: "5 stars", "4/5" and "10 out of 10" are left alone, and a number
# of more than 9 digits is a code, not an amount (and would not fit int() cheaply)
_NUMBER = re.compile(r"(?<![\w.,/#-])(\d{1,9})(?![\w.,/]|\s*(?:stars?\b|out\s+of\b|/))",
                     re.IGNORECASE)


def change_number(text: str, rng: random.Random, lexicons: Lexicons) -> str | None:
    """A number in the text (not a rating) changed to another ("3 days" → "5 days")."""
    found = list(_NUMBER.finditer(text))
    if not found:
        return None
    m = rng.choice(found)
    n = int(m.group(1))
    low, high = max(1, n // 2), max(n * 2, n + 3)
    new = rng.choice([k for k in range(low, min(high, low + 50) + 1) if k != n])
    return text[:m.start(1)] + str(new) + text[m.end(1):]


PERTURBATIONS: dict[str, Perturbation] = {p.name: p for p in (
    Perturbation("typos", typos, "keyboard typos in a few words (nlpaug's KeyboardAug)",
                 {"words": 2, "chars": 1}, _check_typos),
    Perturbation("strip_punctuation", strip_punctuation, "the trailing punctuation removed"),
    Perturbation("add_punctuation", add_punctuation, 'another ending: "!", ".", "!!" or "..."'),
    Perturbation("lowercase", lowercase, "the whole text in lower case"),
    Perturbation("uppercase", uppercase, "the whole text in upper case"),
    Perturbation("contract", contract, "long forms contracted (do not → don't)"),
    Perturbation("expand", expand, "contractions expanded (don't → do not)"),
    Perturbation("add_url", add_url, "a made-up link added", {"where": "end"}, _check_where),
    Perturbation("add_order_number", add_order_number, "a made-up order number added",
                 {"where": "end"}, _check_where),
    Perturbation("add_sentence", add_sentence, "a sentence from a lexicon added",
                 {"sentences": "", "where": "end"}, _check_sentences),
    Perturbation("swap", swap, "a lexicon's word replaced by another of the same lexicon",
                 {"lexicon": ""}, _check_lexicon),
    Perturbation("change_number", change_number, "a number (not a rating) changed"),
)}
