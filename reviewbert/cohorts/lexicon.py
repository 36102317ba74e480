"""The word lists of the review properties: aspects, phone brands, negations, contrast words.

The lists live in a small YAML file the user can edit (the shipped one, ``lexicon.yaml``
beside this module, says what each list is for). :func:`load_lexicon` finds it: a path
given, else ``$REVIEWBERT_LEXICON``, else ``<cache>/lexicon.yaml`` when it exists (the cache
base of ``reviewbert/store/location.py``), else the shipped file. :func:`parse_lexicon`
checks a file before anything uses it, and every error it raises is one line naming the
file and the field, so a page can show it as it is.

A phrase matches case-insensitively as whole words, its words in order with anything but
letters and digits between them; a phrase starting with ``n'`` (``n't``) matches the end of
a word instead, so ``n't`` counts in "don't"; one holding another sign ("$") is matched as
written (:func:`kind`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from reviewbert.fsio import atomic_write_text
from reviewbert.store.location import BASE_ENV

ENV = "REVIEWBERT_LEXICON"
FILE_NAME = "lexicon.yaml"
SHIPPED = Path(__file__).with_name(FILE_NAME)
LISTS = ("aspects", "brands", "negations", "contrast")
ASPECT_NAME = re.compile(r"[a-z][a-z0-9_]{0,30}")
MAX_ASPECTS = 20
MAX_PHRASES = 200
MAX_PHRASE = 60
MAX_CHARS = 200_000
"""A lexicon file's size limit: far above any word list, far below what would stall YAML."""


class LexiconError(ValueError):
    """A lexicon that cannot be read or used (one line, naming the file and the field)."""


@dataclass(frozen=True)
class Lexicon:
    """The checked lists (phrases lower-cased, spaces collapsed, duplicates dropped) and
    where they were read from; build one with :func:`parse_lexicon` or :func:`load_lexicon`."""
    aspects: dict[str, tuple[str, ...]]
    brands: tuple[str, ...]
    negations: tuple[str, ...]
    contrast: tuple[str, ...]
    fingerprint: str = ""                       # sha256 of the lists' canonical JSON
    origin: str = field(default="", compare=False)

    def __hash__(self) -> int:
        # the aspects dict is unhashable; the fingerprint already stands for every list
        return hash(self.fingerprint)

    @property
    def lists(self) -> dict[str, tuple[str, ...]]:
        """Every list by its column-like name: "aspect_<name>" for each aspect, then
        "brands", "negations", "contrast"."""
        out = {f"aspect_{name}": phrases for name, phrases in self.aspects.items()}
        out.update(brands=self.brands, negations=self.negations, contrast=self.contrast)
        return out

    @functools.cached_property
    def patterns(self) -> dict[str, re.Pattern | None]:
        """One compiled alternation per list of :attr:`lists` (None for an empty list, which
        matches nothing): to find or highlight the matches in one text."""
        return {name: compile_phrases(phrases) for name, phrases in self.lists.items()}

    @functools.cached_property
    def matcher(self) -> Matcher:
        """What counts the matches of every list in many texts (:meth:`Matcher.count`)."""
        return Matcher(self.lists)


def canonical(aspects: dict, brands, negations, contrast) -> str:
    """The lists' canonical JSON (aspects in their order: it is the columns' order)."""
    return json.dumps({"aspects": [[k, list(v)] for k, v in aspects.items()],
                       "brands": list(brands), "negations": list(negations),
                       "contrast": list(contrast)}, ensure_ascii=False, separators=(",", ":"))


# ------------------------------------------------------------------------- matching
_PIECE = re.compile(r"\w+")
_PLAIN = re.compile(r"[\w\s'’-]+")


def kind(phrase: str) -> str:
    """How a phrase matches: "suffix" (starts with n': the end of a word), "words" (letters,
    digits, spaces, apostrophes and hyphens: its runs of letters and digits, in order, each
    a whole word, with anything else between them) or "literal" (any other character, as
    "$": as written, a whole word at an end that is a letter or digit)."""
    if phrase.startswith("n'"):
        return "suffix"
    return "words" if _PLAIN.fullmatch(phrase) and _PIECE.search(phrase) else "literal"


def _phrase_regex(phrase: str) -> str:
    if kind(phrase) == "words":
        return r"(?<!\w)" + r"\W+".join(_PIECE.findall(phrase)) + r"(?!\w)"
    body = re.escape(phrase).replace("'", "['’]")
    left = r"(?<!\w)" if kind(phrase) == "literal" and re.match(r"\w", phrase) else ""
    right = r"(?!\w)" if re.search(r"\w$", phrase) else ""
    return left + body + right


def _order(phrase: str) -> tuple:
    """Longer phrases first (in words, then characters): "customer service" is taken whole."""
    return (-len(_PIECE.findall(phrase)), -len(phrase), phrase)


def compile_phrases(phrases) -> re.Pattern | None:
    """A case-insensitive alternation matching any of ``phrases``, longer phrases first."""
    phrases = sorted(set(phrases), key=_order)
    if not phrases:
        return None
    return re.compile("|".join(f"(?:{_phrase_regex(p)})" for p in phrases), re.IGNORECASE)


class Matcher:
    """Counts, in one pass over a text's words, the matches of several lists.

    The alternation regexes of :attr:`Lexicon.patterns` would scan each text once per list;
    this looks each word up once in an index of the lists' first words instead, and gives
    the same counts for word phrases (a match is taken whole and the next one starts after
    it, longer phrases first). Suffix and literal phrases are few and are counted by their
    own regexes, apart from the word phrases of their list.
    """

    def __init__(self, lists: dict[str, tuple[str, ...]]):
        self.names = tuple(lists)
        index: dict[str, list] = {}
        others = []
        for li, phrases in enumerate(lists.values()):
            for phrase in sorted(set(phrases), key=_order):
                if kind(phrase) == "words":
                    first, *rest = _PIECE.findall(phrase)
                    index.setdefault(first, []).append((li, rest))
                else:
                    others.append((li, re.compile(_phrase_regex(phrase))))
        # per word: its lists' phrases, each list's longest first (sorted is stable)
        self.index = {w: tuple(sorted(e, key=lambda x: x[0])) for w, e in index.items()}
        self.others = tuple(others)

    def count(self, text: str) -> list[int]:
        """The number of matches of each list in ``text``, in :attr:`names`' order."""
        low = text.lower().replace("’", "'")
        words = _PIECE.findall(low)
        counts = [0] * len(self.names)
        free = [0] * len(self.names)     # per list: the first word a new match may start at
        index = self.index
        for i, word in enumerate(words):
            entries = index.get(word)
            if entries is None:
                continue
            for li, rest in entries:
                if i >= free[li] and (not rest or words[i + 1:i + 1 + len(rest)] == rest):
                    counts[li] += 1
                    free[li] = i + 1 + len(rest)
        for li, pattern in self.others:
            counts[li] += len(pattern.findall(low))
        return counts


# ------------------------------------------------------------------ reading and checking
def _one_line(text) -> str:
    return " ".join(str(text).split())[:200]


def _phrases(value, origin: str, where: str, required: bool) -> tuple[str, ...]:
    if value is None:
        value = []
    if not isinstance(value, list):
        raise LexiconError(f"{origin}: {where}: write a list of phrases ([a, b, c]), "
                           f"not {type(value).__name__}")
    if required and not value:
        raise LexiconError(f"{origin}: {where}: an aspect needs at least one phrase")
    if len(value) > MAX_PHRASES:
        raise LexiconError(f"{origin}: {where}: at most {MAX_PHRASES} phrases ({len(value)} given)")
    out: dict[str, None] = {}
    for i, raw in enumerate(value):
        if isinstance(raw, bool):
            raise LexiconError(f"{origin}: {where}[{i}]: YAML read an unquoted yes/no/on/off as "
                               f"{raw}: put the word in quotes")
        if isinstance(raw, (int, float)):
            raw = str(raw)
        if not isinstance(raw, str):
            raise LexiconError(f"{origin}: {where}[{i}]: a phrase is text, not {type(raw).__name__}")
        phrase = " ".join(raw.replace("’", "'").split()).lower()
        if not 1 <= len(phrase) <= MAX_PHRASE:
            raise LexiconError(f"{origin}: {where}[{i}]: a phrase has 1 to {MAX_PHRASE} characters "
                               f"({len(phrase)} given)")
        if not phrase.isprintable():
            raise LexiconError(f"{origin}: {where}[{i}]: {phrase[:30]!r} holds a control character")
        out[phrase] = None
    return tuple(out)


def _aspects(value, origin: str) -> dict[str, tuple[str, ...]]:
    if not isinstance(value, dict):
        raise LexiconError(f"{origin}: aspects: write a mapping of aspect name to phrases")
    if len(value) > MAX_ASPECTS:
        raise LexiconError(f"{origin}: aspects: at most {MAX_ASPECTS} aspects ({len(value)} given)")
    out = {}
    for name, phrases in value.items():
        if not isinstance(name, str) or not ASPECT_NAME.fullmatch(name):
            raise LexiconError(f"{origin}: aspects: {str(name)[:40]!r} is not an aspect name "
                               f"(lower-case letters, digits and _, starting with a letter, "
                               f"at most 31)")
        out[name] = _phrases(phrases, origin, f"aspects.{name}", required=True)
    return out


def parse_lexicon(text: str, origin: str = "lexicon") -> Lexicon:
    """A checked :class:`Lexicon` from a YAML file's text; :class:`LexiconError` otherwise."""
    if not isinstance(text, str):
        raise LexiconError(f"{origin}: a lexicon is text, not {type(text).__name__}")
    if len(text) > MAX_CHARS:
        raise LexiconError(f"{origin}: at most {MAX_CHARS:,} characters ({len(text):,} given)")
    try:
        data = yaml.safe_load(text)
    except (yaml.YAMLError, RecursionError, ValueError) as e:
        raise LexiconError(f"{origin}: not valid YAML: {_one_line(e)}") from None
    if not isinstance(data, dict):
        raise LexiconError(f"{origin}: write a mapping with the keys {', '.join(LISTS)}")
    unknown = [str(k) for k in data if k not in LISTS]
    if unknown:
        raise LexiconError(f"{origin}: {unknown[0][:40]!r} is not a list of the lexicon "
                           f"(the keys are {', '.join(LISTS)})")
    missing = [k for k in LISTS if k not in data]
    if missing:
        raise LexiconError(f"{origin}: {missing[0]}: missing (the keys are {', '.join(LISTS)})")
    aspects = _aspects(data["aspects"], origin)
    lists = {k: _phrases(data[k], origin, k, required=False) for k in LISTS[1:]}
    digest = hashlib.sha256(canonical(aspects, **lists).encode("utf-8")).hexdigest()
    return Lexicon(aspects, fingerprint=digest, origin=origin, **lists)


# ------------------------------------------------------------------ where the file lives
def user_path() -> Path:
    """Where the user's lexicon is kept: ``$REVIEWBERT_LEXICON``, else ``<cache>/lexicon.yaml``."""
    own = os.environ.get(ENV)
    if own:
        return Path(own)
    return Path(os.environ.get(BASE_ENV) or Path.home() / ".cache" / "reviewbert") / FILE_NAME


def resolve(path=None) -> Path:
    """The file :func:`load_lexicon` reads: ``path``, else the variable's, else the user's
    file when it exists, else the shipped one."""
    if path is not None:
        return Path(path)
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    user = user_path()
    return user if user.is_file() else SHIPPED


def load_lexicon(path=None) -> Lexicon:
    """The lexicon in force (see :func:`resolve`); :class:`LexiconError` when that file
    cannot be read or is not a valid lexicon (a broken user file is reported, not skipped)."""
    where = resolve(path)
    try:
        text = where.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise LexiconError(f"{where}: cannot read it: {_one_line(getattr(e, 'strerror', None) or e)}") \
            from None
    return parse_lexicon(text, str(where))


def save_lexicon(text: str, path=None) -> Lexicon:
    """Check ``text`` and write it (atomically, comments kept) to ``path`` or
    :func:`user_path`; returns the lexicon it holds. Nothing is written when it is invalid."""
    where = Path(path) if path is not None else user_path()
    lexicon = parse_lexicon(text, str(where))
    atomic_write_text(where, text)
    return lexicon


def shipped_text() -> str:
    """The shipped lexicon file, comments included (the starting point of an edit)."""
    return SHIPPED.read_text(encoding="utf-8")
