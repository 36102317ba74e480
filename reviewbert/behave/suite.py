"""A behavioural suite file: parsed, validated, dumped back and fingerprinted.

A suite is YAML read with ``yaml.safe_load`` only (no Python tags: nothing in a file is
ever executed), then checked field by field against :class:`Suite` and :class:`TestSpec`:
unknown keys, wrong types, sizes over the limits below, placeholders no lexicon fills,
bad star ranges and duplicate test names are refused with a one-line :class:`SuiteError`
naming the file, the test and the field. The format is documented with an example in
``reviewbert/behave/suites/default.yaml`` and in the package's docstring
(``reviewbert/behave/__init__.py``).

Placeholders: ``{x}`` draws from lexicon ``x``; ``{x2}`` with no lexicon ``x2`` draws from
``x``, a different word from ``{x1}`` (every placeholder of one template that draws from
one lexicon under another name gets another word). Other braces are plain text.
"""
from __future__ import annotations

import functools
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from reviewbert.behave.perturb import PERTURBATIONS

TYPES = ("MFT", "INV", "DIR")
DIRECTIONS = ("up", "down")
SOURCES = ("reviews",)
DEFAULT_TOLERANCE = {"INV": 0.25, "DIR": 0.1}
DEFAULT_MAX_CASES = 200
DEFAULT_SUITE_PATH = Path(__file__).resolve().parent / "suites" / "default.yaml"

MAX_FILE_BYTES = 1_000_000
MAX_TESTS = 500
MAX_WORDS = 2_000            # per lexicon
MAX_LEXICONS = 500
MAX_TEXT = 2_000             # characters of a template, case text or word
MAX_NAME = 200               # characters of a name, capability or lexicon name
MAX_TEMPLATES = 500          # per test
MAX_CASES_LIMIT = 10_000     # max_cases, and explicit cases per test
MAX_TOLERANCE = 4.0          # E★ lies in 1..5

PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_LINE_BREAKS = re.compile(r"[\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class SuiteError(ValueError):
    """A suite, template or CSV that cannot be used: one line naming where and why."""

    def __init__(self, message: str):
        # one line whatever the names it quotes hold: a message goes into one st.error
        # and one line of the command line's output
        super().__init__(_LINE_BREAKS.sub(" ", str(message)))


def quoted(s, limit: int = 60) -> str:
    """``s`` for a message: cut to ``limit`` characters, control characters escaped."""
    s = str(s)
    return repr(s if len(s) <= limit else s[:limit] + "…")


@dataclass(frozen=True)
class CaseSpec:
    """An explicit MFT case: a text and the star range (inclusive) it should get."""

    text: str
    stars: tuple[int, int]


@dataclass(frozen=True)
class TestSpec:
    """One test of a suite, as its file says (see the module docstring)."""

    __test__ = False            # a name pytest would otherwise try to collect

    name: str
    capability: str
    type: str
    description: str = ""
    templates: tuple[str, ...] = ()
    perturbed: tuple[str, ...] = ()
    source: str | None = None
    perturbation: str | None = None
    params: dict = field(default_factory=dict)
    review_stars: tuple[int, int] | None = None
    cases: tuple[CaseSpec, ...] = ()
    stars: tuple[int, int] | None = None
    direction: str | None = None
    tolerance: float | None = None
    max_cases: int = DEFAULT_MAX_CASES

    @property
    def tol(self) -> float:
        """The tolerance on ΔE★: the file's, else the type's default (0.25 INV, 0.1 DIR)."""
        if self.tolerance is not None:
            return float(self.tolerance)
        return DEFAULT_TOLERANCE.get(self.type, 0.0)


@dataclass(frozen=True)
class Suite:
    """A named, seeded set of tests and the word lists their templates draw from."""

    name: str
    description: str
    seed: int
    lexicons: dict[str, tuple[str, ...]]
    tests: tuple[TestSpec, ...]

    def test(self, name: str) -> TestSpec:
        """The test called ``name`` (KeyError if none)."""
        for t in self.tests:
            if t.name == name:
                return t
        raise KeyError(name)


# ------------------------------------------------------------------ placeholders
def placeholders(template: str) -> list[str]:
    """The placeholder names of ``template``, each once, in order of appearance."""
    return list(dict.fromkeys(PLACEHOLDER.findall(template)))


def lexicon_of(name: str, lexicons: Mapping) -> str | None:
    """The lexicon placeholder ``name`` draws from: itself, else its name without
    trailing digits; None when neither is a lexicon."""
    if name in lexicons:
        return name
    stem = name.rstrip("0123456789")
    return stem if stem != name and stem in lexicons else None


def placeholder_problem(template: str, lexicons: Mapping, also: str = "") -> str | None:
    """Why ``template`` (with ``also``: its perturbed twin, filled alike) cannot be filled."""
    names = placeholders(template + "\0" + also)
    need: dict[str, int] = {}
    for name in names:
        lex = lexicon_of(name, lexicons)
        if lex is None:
            return f"placeholder {{{name}}} names no lexicon"
        need[lex] = need.get(lex, 0) + 1
    for lex, k in need.items():
        if len(lexicons[lex]) < k:
            return f"{k} placeholders draw different words from lexicon {quoted(lex)}, " \
                   f"which has {len(lexicons[lex])}"
    return None


# ------------------------------------------------------------------- validation
SUITE_KEYS = ("name", "description", "seed", "lexicons", "tests")
TEST_KEYS = ("name", "capability", "type", "description", "templates", "perturbed", "source",
             "perturbation", "params", "review_stars", "cases", "stars", "direction",
             "tolerance", "max_cases")
CASE_KEYS = ("text", "stars")
MAX_EXPANDED_CHARS = 4 * MAX_FILE_BYTES
"""The characters a suite may hold once YAML's aliases are expanded: a file of 1 MB may
name one long word a million times (``*word``); its suite is refused, not built."""


class _Reader:
    """Checks the values of one file (``origin``), naming the test being read."""

    def __init__(self, origin: str):
        self.origin, self.test, self.chars = origin, None, 0

    def fail(self, message: str):
        where = self.origin if self.test is None else f"{self.origin}, test {quoted(self.test)}"
        raise SuiteError(f"{where}: {message}")

    def mapping(self, value, what: str, keys: tuple[str, ...]) -> dict:
        if not isinstance(value, dict):
            self.fail(f"{what} must be a mapping (key: value), got {_kind(value)}")
        unknown = [k for k in value if k not in keys]
        if unknown:
            self.fail(f"unknown key {quoted(unknown[0])} in {what} (known: {', '.join(keys)})")
        return value

    def text(self, value, what: str, limit: int = MAX_TEXT, empty: bool = False) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)      # a word list of numbers ([2, 3, 10]) means the digits
        if not isinstance(value, str):
            self.fail(f"{what} must be text, got {_kind(value)} (quote yes, no, on, off, "
                      f"null and decimals)" if isinstance(value, (bool, float, type(None)))
                      else f"{what} must be text, got {_kind(value)}")
        if not empty and not value.strip():
            self.fail(f"{what} is empty")
        if len(value) > limit:
            self.fail(f"{what} is longer than {limit:,} characters")
        self.chars += len(value)
        if self.chars > MAX_EXPANDED_CHARS:
            self.fail(f"the suite holds more than {MAX_EXPANDED_CHARS:,} characters once its "
                      f"aliases are expanded")
        return value

    def texts(self, value, what: str, most: int, limit: int = MAX_TEXT) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list):
            self.fail(f"{what} must be a list, got {_kind(value)}")
        if len(value) > most:
            self.fail(f"{what} has more than {most:,} items")
        return tuple(self.text(v, f"{what} item {i + 1}", limit) for i, v in enumerate(value))

    def integer(self, value, what: str, low: int, high: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.fail(f"{what} must be a whole number {low:,}–{high:,}, got {_short(value)}")
        return value

    def number(self, value, what: str, low: float, high: float) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) \
                or not low <= value <= high:
            self.fail(f"{what} must be a number {low:g}–{high:g}, got {_short(value)}")
        return float(value)

    def stars(self, value, what: str) -> tuple[int, int]:
        if isinstance(value, int) and not isinstance(value, bool):
            value = [value, value]
        ok = isinstance(value, list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 5 for v in value)
        if not ok or value[0] > value[1]:
            self.fail(f"{what} must be [min, max] with whole stars 1–5 and min ≤ max, "
                      f"got {_short(value)}")
        return (value[0], value[1])

    def choice(self, value, what: str, options: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in options:
            self.fail(f"{what} must be one of {', '.join(options)}, got {_short(value)}")
        return value


def _kind(value) -> str:
    return {dict: "a mapping", list: "a list", str: "text", bool: "true/false",
            type(None): "nothing"}.get(type(value), type(value).__name__)


def _short(value) -> str:
    return quoted(value, 40) if isinstance(value, str) else \
        _kind(value) if isinstance(value, (dict, list)) else quoted(repr(value), 40)[1:-1]


def _origin(origin) -> str:
    return " ".join(str(origin).split())[:120] or "suite"


def _lexicons(value, reader: _Reader) -> dict[str, tuple[str, ...]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        reader.fail(f"lexicons must be a mapping of names to word lists, got {_kind(value)}")
    if len(value) > MAX_LEXICONS:
        reader.fail(f"more than {MAX_LEXICONS} lexicons")
    out = {}
    for name, words in value.items():
        if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) \
                or len(name) > MAX_NAME:
            reader.fail(f"lexicon name {_short(name)} must be letters, digits and _ "
                        f"(not starting with a digit)")
        words = reader.texts(words, f"lexicon {quoted(name)}", MAX_WORDS)
        if not words:
            reader.fail(f"lexicon {quoted(name)} is empty")
        out[name] = tuple(dict.fromkeys(words))      # a word listed twice counts once
    return out


def _cases(value, reader: _Reader) -> tuple[CaseSpec, ...]:
    if not isinstance(value, list):
        reader.fail(f"cases must be a list, got {_kind(value)}")
    if len(value) > MAX_CASES_LIMIT:
        reader.fail(f"more than {MAX_CASES_LIMIT:,} cases")
    out = []
    for i, c in enumerate(value, 1):
        c = reader.mapping(c, f"case {i}", CASE_KEYS)
        if "text" not in c or "stars" not in c:
            reader.fail(f"case {i} needs text and stars")
        out.append(CaseSpec(reader.text(c["text"], f"case {i} text"),
                            reader.stars(c["stars"], f"case {i} stars")))
    return tuple(out)


def _params(value, perturbation: str | None, lexicons, reader: _Reader) -> dict:
    if value is None:
        return {}
    if perturbation is None:
        reader.fail("params need a perturbation")
    defaults = PERTURBATIONS[perturbation].params
    value = reader.mapping(value, f"params of {perturbation}", tuple(defaults))
    out = {}
    for key, v in value.items():
        default = defaults[key]
        if isinstance(default, bool) or isinstance(default, int):
            out[key] = reader.integer(v, f"params.{key}", 0, 1_000)
        elif key == "sentences" and isinstance(v, list):
            out[key] = list(reader.texts(v, f"params.{key}", MAX_WORDS))
        else:
            out[key] = reader.text(v, f"params.{key}", MAX_NAME)
    check = PERTURBATIONS[perturbation].check
    problem = check({**defaults, **out}, lexicons) if check else None
    if problem:
        reader.fail(f"params of {perturbation}: {problem}")
    return out


def _fields(d: dict, reader: _Reader, lexicons) -> dict:
    """The test's fields, each checked alone (their combinations: :func:`_combination`)."""
    out = {"name": d["name"]}
    for key in ("capability", "type"):
        if key not in d:
            reader.fail(f"{key} is missing")
    out["capability"] = reader.text(d["capability"], "capability", MAX_NAME).strip()
    out["type"] = reader.choice(d["type"].upper() if isinstance(d["type"], str) else d["type"],
                                "type", TYPES)
    if d.get("description") is not None:
        out["description"] = reader.text(d["description"], "description", MAX_TEXT, empty=True)
    for key in ("templates", "perturbed"):
        if d.get(key) is not None:
            out[key] = reader.texts(d[key], key, MAX_TEMPLATES)
    if d.get("source") is not None:
        out["source"] = reader.choice(d["source"], "source", SOURCES)
    if d.get("perturbation") is not None:
        name = d["perturbation"]
        if not isinstance(name, str) or name not in PERTURBATIONS:
            reader.fail(f"unknown perturbation {_short(name)} (known: {', '.join(PERTURBATIONS)})")
        out["perturbation"] = name
    out["params"] = _params(d.get("params"), out.get("perturbation"), lexicons, reader)
    for key in ("review_stars", "stars"):
        if d.get(key) is not None:
            out[key] = reader.stars(d[key], key)
    if d.get("cases") is not None:
        out["cases"] = _cases(d["cases"], reader)
    if d.get("direction") is not None:
        out["direction"] = reader.choice(d["direction"], "direction", DIRECTIONS)
    if d.get("tolerance") is not None:
        out["tolerance"] = reader.number(d["tolerance"], "tolerance", 0.0, MAX_TOLERANCE)
    if d.get("max_cases") is not None:
        out["max_cases"] = reader.integer(d["max_cases"], "max_cases", 1, MAX_CASES_LIMIT)
    return out


def _combination(t: TestSpec, reader: _Reader, lexicons) -> None:
    """The rules between a test's fields: what each type needs and may not have."""
    def forbid(*keys: str, why: str) -> None:
        for key in keys:
            if getattr(t, key) not in (None, (), {}):
                reader.fail(f"{key} {why}")
    if t.type == "MFT":
        forbid("perturbed", "perturbation", "source", "review_stars", "direction", "tolerance",
               why="does not apply to an MFT test")
        if t.templates and t.stars is None:
            reader.fail("stars is missing: an MFT test's templates need the expected [min, max]")
        if t.stars is not None and not t.templates:
            reader.fail("stars apply to templates, and this test has none")
        if not t.templates and not t.cases:
            reader.fail("an MFT test needs templates with stars, or cases")
    else:
        forbid("cases", "stars", why=f"does not apply to an {t.type} test (an MFT's)")
        if t.type == "DIR" and t.direction is None:
            reader.fail("direction is missing: a DIR test says up or down")
        if t.type == "INV":
            forbid("direction", why="applies to DIR tests only")
        if bool(t.perturbed) == bool(t.perturbation):
            reader.fail(f"an {t.type} test needs either perturbed (aligned with templates) "
                        f"or a perturbation")
        if t.source is not None and t.templates:
            reader.fail("give templates or a source of originals, not both")
        if t.source is None and not t.templates:
            reader.fail(f"an {t.type} test needs templates or source: reviews")
        if t.perturbed and len(t.perturbed) != len(t.templates):
            reader.fail(f"perturbed has {len(t.perturbed)} items and templates "
                        f"{len(t.templates)}: they are read in pairs")
        if t.review_stars is not None and t.source is None:
            reader.fail("review_stars needs source: reviews")
    for i, template in enumerate(t.templates):
        twin = t.perturbed[i] if t.perturbed else ""
        problem = placeholder_problem(template, lexicons, twin)
        if problem:
            reader.fail(f"templates item {i + 1}: {problem}")


def _test(d, index: int, reader: _Reader, lexicons, seen: set[str]) -> TestSpec:
    reader.test = None
    if not isinstance(d, dict) or "name" not in d:
        reader.fail(f"test {index} must be a mapping with a name, got {_kind(d)}")
    name = reader.text(d["name"], f"test {index} name", MAX_NAME).strip()
    if name in seen:
        reader.fail(f"two tests are called {quoted(name)}: test names must be unique")
    seen.add(name)
    reader.test = name
    reader.mapping(d, "the test", TEST_KEYS)
    t = TestSpec(**{**_fields(d, reader, lexicons), "name": name})
    _combination(t, reader, lexicons)
    return t


def suite_from_dict(data, origin: str = "suite") -> Suite:
    """The :class:`Suite` of a parsed YAML document (or of :func:`suite_to_dict`'s form)."""
    reader = _Reader(_origin(origin))
    if not isinstance(data, dict):
        reader.fail(f"a suite is a mapping with name, lexicons and tests, got {_kind(data)}")
    reader.mapping(data, "the suite", SUITE_KEYS)
    if "tests" not in data:
        reader.fail("tests is missing")
    name = reader.text(data.get("name", "suite"), "name", MAX_NAME).strip()
    description = reader.text(data.get("description") or "", "description", MAX_TEXT, empty=True)
    seed = reader.integer(data.get("seed", 0), "seed", 0, 2**63 - 1)
    lexicons = _lexicons(data.get("lexicons"), reader)
    tests = data["tests"] if data["tests"] is not None else []
    if not isinstance(tests, list):
        reader.fail(f"tests must be a list, got {_kind(tests)}")
    if len(tests) > MAX_TESTS:
        reader.fail(f"more than {MAX_TESTS} tests")
    seen: set[str] = set()
    specs = tuple(_test(d, i, reader, lexicons, seen) for i, d in enumerate(tests, 1))
    return Suite(name, description, seed, lexicons, specs)


def parse_suite(text: str | bytes, origin: str = "suite") -> Suite:
    """The suite a YAML text holds; :class:`SuiteError` (one line) for anything wrong."""
    import yaml
    origin = _origin(origin)
    if isinstance(text, (bytes, bytearray)):
        if len(text) > MAX_FILE_BYTES:
            raise SuiteError(f"{origin}: the file is over {MAX_FILE_BYTES:,} bytes")
        try:
            text = bytes(text).decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise SuiteError(f"{origin}: not UTF-8 text (byte {e.start})") from None
    if not isinstance(text, str):
        raise SuiteError(f"{origin}: a suite is YAML text, got {type(text).__name__}")
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", "replace")) > MAX_FILE_BYTES:
        raise SuiteError(f"{origin}: the file is over {MAX_FILE_BYTES:,} bytes")
    try:
        # safe_load: plain data only. A !!python/object tag is an error here, never a call.
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise SuiteError(f"{origin}: {_yaml_problem(e)}") from None
    except RecursionError:
        raise SuiteError(f"{origin}: YAML nested too deeply") from None
    except ValueError as e:     # an integer of thousands of digits (int()'s own limit)
        raise SuiteError(f"{origin}: {str(e)[:120]}") from None
    return suite_from_dict(data, origin)


def _yaml_problem(e) -> str:
    """A YAML error as "line N: problem" (its first line; YAML's own is several)."""
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    problem = getattr(e, "problem", None) or getattr(e, "reason", None) or str(e)
    problem = " ".join(str(problem).split())[:200]
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    position = getattr(e, "position", None)
    return f"character {position + 1}: {problem}" if position is not None else problem


def load_suite(path) -> Suite:
    """The suite in the file ``path`` (named by its file name in errors)."""
    path = Path(path)
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise SuiteError(f"{_origin(path.name)}: the file is over {MAX_FILE_BYTES:,} bytes")
        data = path.read_bytes()
    except OSError as e:
        raise SuiteError(f"{_origin(path.name)}: cannot read it ({e.strerror or e})") from None
    return parse_suite(data, path.name)


# ----------------------------------------------------------- dump, fingerprint
def spec_to_dict(t: TestSpec) -> dict:
    """A test as its file writes it: the fields that differ from their defaults."""
    d: dict = {"name": t.name, "capability": t.capability, "type": t.type}
    if t.description:
        d["description"] = t.description
    for key in ("templates", "perturbed"):
        if getattr(t, key):
            d[key] = list(getattr(t, key))
    for key in ("source", "perturbation", "direction", "tolerance"):
        if getattr(t, key) is not None:
            d[key] = getattr(t, key)
    if t.params:
        d["params"] = {k: list(v) if isinstance(v, (list, tuple)) else v
                       for k, v in t.params.items()}
    for key in ("review_stars", "stars"):
        if getattr(t, key) is not None:
            d[key] = list(getattr(t, key))
    if t.cases:
        d["cases"] = [{"text": c.text, "stars": list(c.stars)} for c in t.cases]
    if t.max_cases != DEFAULT_MAX_CASES:
        d["max_cases"] = t.max_cases
    return d


def suite_to_dict(suite: Suite) -> dict:
    """The suite as plain data, in its file's layout (what :func:`suite_from_dict` reads)."""
    d: dict = {"name": suite.name}
    if suite.description:
        d["description"] = suite.description
    d["seed"] = suite.seed
    d["lexicons"] = {k: list(v) for k, v in suite.lexicons.items()}
    d["tests"] = [spec_to_dict(t) for t in suite.tests]
    return d


def dump_suite(suite: Suite) -> str:
    """The suite as YAML that :func:`parse_suite` reads back equal."""
    import yaml
    return yaml.safe_dump(suite_to_dict(suite), sort_keys=False, allow_unicode=True,
                          default_flow_style=None, width=100)


FINGERPRINT_FORMAT = "reviewbert-behave-suite/1"


def suite_fingerprint(suite: Suite) -> str:
    """sha256 (hex) of the suite's canonical JSON: equal suites, equal fingerprints, in any
    process (no ``hash()``, which Python salts per process)."""
    blob = json.dumps({"format": FINGERPRINT_FORMAT, "suite": suite_to_dict(suite)},
                      sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("ascii")).hexdigest()


# -------------------------------------------------------------- default, editing
def default_suite() -> Suite:
    """The shipped suite, ``reviewbert/behave/suites/default.yaml`` (read again when the
    file changes)."""
    try:
        st = DEFAULT_SUITE_PATH.stat()
    except OSError as e:
        raise SuiteError(f"{DEFAULT_SUITE_PATH.name}: cannot read it ({e.strerror or e})") from None
    return _default_suite(st.st_mtime_ns, st.st_size)


@functools.lru_cache(maxsize=2)
def _default_suite(mtime_ns: int, size: int) -> Suite:
    return load_suite(DEFAULT_SUITE_PATH)


def with_test(suite: Suite, test: TestSpec) -> Suite:
    """The suite with ``test`` in place of the test of the same name, or appended; checked
    again as a whole (SuiteError if the result is not a valid suite)."""
    tests = list(suite.tests)
    names = [t.name for t in tests]
    if test.name in names:
        tests[names.index(test.name)] = test
    else:
        tests.append(test)
    return suite_from_dict(suite_to_dict(replace(suite, tests=tuple(tests))), suite.name)


def merge(suite: Suite, *tests: TestSpec | Suite) -> Suite:
    """The suite with each test added (:func:`with_test`: a test of the same name is
    replaced); a :class:`Suite` among them brings its tests and lexicons (a lexicon of the
    same name must hold the same words)."""
    lexicons = dict(suite.lexicons)
    flat: list[TestSpec] = []
    for item in tests:
        if isinstance(item, Suite):
            for name, words in item.lexicons.items():
                if lexicons.setdefault(name, words) != words:
                    raise SuiteError(f"{_origin(suite.name)}: lexicon {quoted(name)} differs "
                                     f"in suite {quoted(item.name)}")
            flat.extend(item.tests)
        else:
            flat.append(item)
    out = replace(suite, lexicons=lexicons)
    by_name = {t.name: i for i, t in enumerate(out.tests)}
    merged = list(out.tests)
    for t in flat:
        if t.name in by_name:
            merged[by_name[t.name]] = t
        else:
            by_name[t.name] = len(merged)
            merged.append(t)
    return suite_from_dict(suite_to_dict(replace(out, tests=tuple(merged))), suite.name)
