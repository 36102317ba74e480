"""A suite's tests turned into cases: templates expanded, reviews and texts perturbed.

Every draw comes from a :class:`random.Random` seeded with the suite's seed plus a stable
hash of the test's name (sha256, never ``hash()``, which Python salts per process), so a
suite gives the same cases in every run and every process, and one test's cases do not
change when another test is added.

Expansion: every combination of a template's placeholders' words (``itertools.product``
over the lexicons), placeholders drawing from one lexicon under different names getting
different words; when there are more than ``max_cases`` combinations (over all the
test's templates), a seeded sample of them, in their enumeration order.
"""
from __future__ import annotations

import bisect
import hashlib
import itertools
import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from reviewbert.behave.perturb import PERTURBATIONS
from reviewbert.behave.suite import PLACEHOLDER, Suite, TestSpec, lexicon_of, placeholders

ENUMERATE_AT_MOST = 50_000
"""Up to this many combinations are listed and sampled; above, indices are sampled from
the range without listing it (a template of five 2,000-word lexicons has 3·10^16)."""
PERTURB_TRIES = 20
"""Originals tried per case wanted: a perturbation that applies to few texts (a brand
swap) stops after ``PERTURB_TRIES × max_cases`` originals."""


@dataclass(frozen=True)
class Case:
    """One case of a test: the text scored and, for INV/DIR, the original it changes."""

    test: str                       # the test's name
    index: int                      # its place in the test's cases
    text: str                       # what the model reads (the perturbed text for INV/DIR)
    original: str | None            # INV/DIR: the text before the change; MFT: None
    stars: tuple[int, int] | None   # MFT: the expected star range (inclusive)
    true_stars: int | None          # a case made from a real review: its true rating


def seed_of(seed: int, name: str) -> int:
    """The seed of one test's draws: the suite's plus a stable hash of the test's name."""
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()
    return int(seed) + int(digest[:16], 16)


def fill(template: str, fills: Mapping[str, str]) -> str:
    """``template`` with each ``{name}`` replaced by its word (other braces left as they are)."""
    return PLACEHOLDER.sub(lambda m: fills.get(m.group(1), m.group()), template)


def _distinct(names: Sequence[str], words: Sequence[str], lexicons: Mapping) -> bool:
    """Whether placeholders that share a lexicon under different names got different words."""
    seen: dict[tuple[str, str], str] = {}
    for name, word in zip(names, words):
        key = (lexicon_of(name, lexicons), word)
        if seen.setdefault(key, name) != name:
            return False
    return True


def fills(templates: Sequence[str], lexicons: Mapping, max_cases: int, rng: random.Random,
          twins: Sequence[str] = ()) -> list[tuple[int, dict[str, str]]]:
    """(template index, {placeholder: word}) of every combination over ``templates`` (each
    with its twin in ``twins``, filled alike), or a seeded sample of ``max_cases`` of them."""
    names = [placeholders(t + "\0" + (twins[i] if twins else "")) for i, t in enumerate(templates)]
    pools = [[lexicons[lexicon_of(n, lexicons)] for n in ns] for ns in names]
    totals = [math.prod(len(p) for p in pool) for pool in pools]
    starts = list(itertools.accumulate(totals, initial=0))
    grand = starts[-1]

    def decode(k: int) -> tuple[int, tuple[str, ...]]:
        ti = bisect.bisect_right(starts, k) - 1
        k -= starts[ti]
        words = []
        for pool in reversed(pools[ti]):
            k, r = divmod(k, len(pool))
            words.append(pool[r])
        return ti, tuple(reversed(words))

    if grand <= ENUMERATE_AT_MOST:
        picked = [k for k in range(grand) if _distinct(names[decode(k)[0]], decode(k)[1], lexicons)]
        if len(picked) > max_cases:
            picked = sorted(rng.sample(picked, max_cases))
    else:
        # drawn from the range itself; a few spare draws stand in for those that repeat a word
        drawn = rng.sample(range(grand), min(grand, 2 * max_cases))
        picked = sorted([k for k in drawn if _distinct(names[decode(k)[0]], decode(k)[1],
                                                       lexicons)][:max_cases])
    out = []
    for k in picked:
        ti, words = decode(k)
        out.append((ti, dict(zip(names[ti], words))))
    return out


def expand_template(template: str, lexicons: Mapping, max_cases: int,
                    rng: random.Random) -> list[str]:
    """The texts one template gives (all, or a seeded sample of ``max_cases``): the
    editor's preview. Its placeholders must be resolvable (``suite.placeholder_problem``)."""
    return [fill(template, f) for _, f in fills([template], lexicons, max_cases, rng)]


def _perturbed(originals, t: TestSpec, lexicons: Mapping, rng: random.Random):
    """(original, perturbed, true stars) for the first ``max_cases`` originals that the
    test's perturbation changes, trying them in the order given."""
    p = PERTURBATIONS[t.perturbation]
    params = {**p.params, **t.params}
    out = []
    for tries, (text, true_stars) in enumerate(originals):
        if len(out) >= t.max_cases or tries >= PERTURB_TRIES * t.max_cases:
            break
        new = p.fn(text, rng, lexicons, **params)
        if new is not None and new != text:
            out.append((text, new, true_stars))
    return out


def _review_originals(t: TestSpec, reviews: Sequence, seed: int):
    """The reviews a source test may perturb (true stars in ``review_stars``), as
    (text, stars), in one order for the whole suite (seeded by the suite's seed, not the
    test's): every test takes the first reviews its perturbation changes, so the tests
    share their originals, and each original, often the longest text of a case, is scored
    once for all of them."""
    low, high = t.review_stars or (1, 5)
    pool = [(r.text, int(r.stars)) for r in reviews
            if isinstance(r.text, str) and r.text.strip()]
    random.Random(seed_of(seed, "source: reviews")).shuffle(pool)
    return [(text, stars) for text, stars in pool if low <= stars <= high]


def cases_of(t: TestSpec, suite: Suite, reviews: Sequence, seed: int) -> list[Case]:
    """The cases of one test (see the module docstring)."""
    rng = random.Random(seed_of(seed, t.name))
    lex = suite.lexicons
    if t.type == "MFT":
        got = [(fill(t.templates[i], f), None, t.stars, None)
               for i, f in fills(t.templates, lex, t.max_cases, rng)]
        got += [(c.text, None, c.stars, None) for c in t.cases]
    elif t.perturbed:
        got = [(fill(t.perturbed[i], f), fill(t.templates[i], f), None, None)
               for i, f in fills(t.templates, lex, t.max_cases, rng, t.perturbed)]
    else:
        if t.source == "reviews":
            originals = _review_originals(t, reviews, seed)
        else:
            # a template's texts, all of them (up to the trial budget): the perturbation
            # may leave some alone, and the cases come from the first it changes
            wanted = PERTURB_TRIES * t.max_cases
            originals = [(fill(t.templates[i], f), None)
                         for i, f in fills(t.templates, lex, wanted, rng)]
            rng.shuffle(originals)
        got = [(new, old, None, stars) for old, new, stars in _perturbed(originals, t, lex, rng)]
    return [Case(t.name, i, text, original, stars, true)
            for i, (text, original, stars, true) in enumerate(got)]


def build_cases(suite: Suite, reviews: Sequence = (), seed: int | None = None
                ) -> dict[str, list[Case]]:
    """Every test's cases, by test name, in the suite's order. ``reviews``: the originals
    of ``source: reviews`` tests (objects with ``.text`` and ``.stars``, as
    :class:`reviewbert.data.examples.Review`); ``seed``: the suite's unless given."""
    seed = suite.seed if seed is None else int(seed)
    return {t.name: cases_of(t, suite, reviews, seed) for t in suite.tests}


def count_cases(suite: Suite, reviews: Sequence = ()) -> int:
    """How many cases the suite gives on ``reviews`` (the run's progress total)."""
    return sum(len(v) for v in build_cases(suite, reviews).values())
