"""Generated bad input for every reader in reviewbert.data (Hypothesis).

Formats: JSON lines, JSON array (one record per line, and a whole document),
Amazon 2023 JSONL (rating/title/text), CSV, TSV, each optionally gzipped, with
a BOM, with CRLF line ends. Inputs: valid records (must come back exactly),
random records (wrong types, missing and extra fields), valid files mangled
(truncated at a random byte, byte noise, inserted or deleted bytes, other text
encodings, gzip before or after), raw random bytes behind a plausible start,
and fields around the 1 MiB line limit.

The contract (tests/fuzzing.py): a DataError naming the file, or rows that are
each usable or counted under a skip reason; never another exception, never a
hang. build_splits (both passes) and the upload preview keep it too.

Each property runs twice: ``test_x`` (a few dozen examples, ``make test``) and
``test_x_fuzz`` (marked ``fuzz``, thousands: ``make fuzz``).
"""
from __future__ import annotations

import codecs
import csv
import gzip
import io
import json
import tempfile
from pathlib import Path

from hypothesis import assume
from hypothesis import strategies as st

from reviewbert.data import MAX_RECORD_BYTES, DataError, DataReport, iter_reviews, unique_reviews
from reviewbert.data import files as datafiles
from reviewbert.model.labels import THREE

from fuzzing import only_data_errors, read_contract, splits_contract, twins

# ------------------------------------------------------------------ strategies
# Review text as people write it: any character except surrogates (not UTF-8) and
# NUL (a NUL near the start means "binary file", by design).
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"),
               min_size=1, max_size=40).filter(lambda t: t.strip())
STARS = st.integers(1, 5)


def _rating_forms(star: int, as_csv: bool):
    """The ways files write a star rating (Amazon 2014: 5.0; 2023: 5.0; scraped CSV: text)."""
    forms = [str(star), f"{star}.0", f"{star}.0 out of 5 stars", f"{star} stars", f"{star}/5"]
    return st.sampled_from(forms) if as_csv else st.sampled_from([star, float(star)] + forms)


KINDS = ("jsonl", "json-lines-array", "json-document", "jsonl-2023", "csv", "tsv")
NAMES = {"jsonl": "reviews.jsonl", "json-lines-array": "reviews.json",
         "json-document": "reviews.json", "jsonl-2023": "Cell_Phones.jsonl",
         "csv": "reviews.csv", "tsv": "reviews.tsv"}


@st.composite
def valid_files(draw):
    """(file name, bytes, options, expected rows): a well-formed file in a random format."""
    kind = draw(st.sampled_from(KINDS))
    n = draw(st.integers(0, 12))
    texts = draw(st.lists(TEXT, min_size=n, max_size=n))
    stars = draw(st.lists(STARS, min_size=n, max_size=n))
    as_csv = kind in ("csv", "tsv")
    ratings = [draw(_rating_forms(s, as_csv)) for s in stars]
    options, expected = {}, [(t.strip(), s) for t, s in zip(texts, stars)]
    if kind == "jsonl-2023":
        titles = draw(st.lists(st.one_of(st.just(""), TEXT), min_size=n, max_size=n))
        records = [{"rating": r, "title": ti, "text": t, "asin": "B0", "helpful_vote": 0}
                   for r, ti, t in zip(ratings, titles, texts)]
        options = {"prepend_title": True}
        expected = [(_join(ti.strip(), t.strip()), s) for ti, t, s in zip(titles, texts, stars)]
    elif as_csv:
        records = [[t, r] for t, r in zip(texts, ratings)]
    else:
        records = [{"reviewText": t, "overall": r, "summary": "s"} for t, r in zip(texts, ratings)]
    eol = draw(st.sampled_from(["\n", "\r\n"]))
    body = _render(kind, records, eol, ascii_only=draw(st.booleans()))
    if n == 0:
        assume(kind in ("csv", "tsv"))  # an empty JSON file is an error, tested elsewhere
    data = body.encode("utf-8")
    if draw(st.booleans()):
        data = codecs.BOM_UTF8 + data
    name = NAMES[kind]
    if draw(st.booleans()):
        data, name = gzip.compress(data, mtime=0), name + ".gz"
    return name, data, options, expected


def _join(title: str, text: str) -> str:
    """The package docstring's rule: "Title. Text", no extra "." after .!?…, either alone."""
    if not title or not text:
        return title or text
    return f"{title} {text}" if title[-1] in ".!?…" else f"{title}. {text}"


def _render(kind: str, records: list, eol: str, ascii_only: bool = True) -> str:
    if kind in ("csv", "tsv"):
        out = io.StringIO()
        # csv.writer quotes a field with a line end only if it is in lineterminator:
        # a bare "\r" in a "\n" file would be written unquoted (a real line break)
        bare_cr = any("\r" in str(c) for row in records for c in row)
        w = csv.writer(out, delimiter="\t" if kind == "tsv" else ",", lineterminator=eol,
                       quoting=csv.QUOTE_ALL if bare_cr else csv.QUOTE_MINIMAL)
        w.writerow(["Reviews", "Rating"])
        w.writerows(records)
        return out.getvalue()
    lines = [json.dumps(r, ensure_ascii=ascii_only) for r in records]
    if kind == "json-lines-array":
        return "[" + ("," + eol).join(lines) + "]" + eol
    if kind == "json-document":
        return json.dumps(records, indent=2, ensure_ascii=ascii_only).replace("\n", eol)
    return "".join(line + eol for line in lines)


# Values of the wrong type (and the right one, now and then) for any field.
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=True)
    | st.text(max_size=20) | st.sampled_from(["5", "4.0 out of 5 stars", "", "NaN", "1e3"]),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6)
KEYS = st.sampled_from(["reviewText", "overall", "summary", "text", "rating", "title", "Reviews",
                        "Rating", "stars", "body", "asin", ""]) | st.text(max_size=8)


@st.composite
def random_record_files(draw):
    """(name, bytes): records with random keys and values, missing and extra fields."""
    kind = draw(st.sampled_from(KINDS))
    records = draw(st.lists(st.dictionaries(KEYS, JSON_VALUES, max_size=6), max_size=10))
    if kind in ("csv", "tsv"):
        header = draw(st.lists(KEYS, min_size=1, max_size=5))
        rows = [[_cell(v) for v in draw(st.lists(JSON_VALUES, max_size=6))] for _ in records]
        out = io.StringIO()
        w = csv.writer(out, delimiter="\t" if kind == "tsv" else ",")
        w.writerow(header)
        w.writerows(rows)
        body = out.getvalue()
    else:
        body = _render(kind, records, "\n", ascii_only=draw(st.booleans()))
    return NAMES[kind], body.encode("utf-8", "surrogatepass")


def _cell(v) -> str:
    return v if isinstance(v, str) else json.dumps(v)


ENCODINGS = ("utf-16", "utf-16-be", "utf-32", "latin-1", "cp1252", "shift_jis", "utf-8-sig",
             "utf-7")


@st.composite
def mangled(draw, source):
    """A file from ``source`` with 1-3 of: truncation at a random byte, byte noise,
    inserted or deleted bytes, another text encoding, doubled; gzip before or after."""
    name, data = draw(source)[:2]
    gz = name.endswith(".gz")
    if gz:
        data = gzip.decompress(data)
        if draw(st.booleans()):  # mangle the compressed bytes instead
            data, gz = gzip.compress(data, mtime=0), False
    for _ in range(draw(st.integers(1, 3))):
        op = draw(st.sampled_from(["truncate", "noise", "insert", "delete", "encode", "double"]))
        n = len(data)
        i = draw(st.integers(0, n))
        if op == "truncate":
            data = data[:i]
        elif op == "noise":
            noise = draw(st.binary(min_size=1, max_size=16))
            data = data[:i] + noise + data[i + len(noise):]
        elif op == "insert":
            data = data[:i] + draw(st.binary(min_size=1, max_size=64)) + data[i:]
        elif op == "delete":
            data = data[:i] + data[i + draw(st.integers(1, 32)):]
        elif op == "encode":
            enc = draw(st.sampled_from(ENCODINGS))
            data = data.decode("utf-8", "replace").encode(enc, "replace")
        else:
            data = data + data
    if gz:
        data = gzip.compress(data, mtime=0)
    return name, data


@st.composite
def raw_bytes(draw):
    """Random bytes behind a start that sends the sniffer down each path."""
    start = draw(st.sampled_from([b"", b"{", b"[", b"[\n{", b"Reviews,Rating\n", b"text\trating\n",
                                  b"\xef\xbb\xbf", b"\x1f\x8b", b"\x1f\x8b\x08\x00\x00\x00"]))
    name = draw(st.sampled_from(["r.jsonl", "r.json", "r.csv", "r.tsv", "r.json.gz"]))
    return name, start + draw(st.binary(max_size=400))


@st.composite
def huge_fields(draw):
    """A record whose text is within a few bytes of the 1 MiB line limit, between good ones."""
    kind = draw(st.sampled_from(["jsonl", "jsonl-2023", "csv", "tsv", "json-lines-array",
                                 "json-document"]))
    size = MAX_RECORD_BYTES + draw(st.integers(-64, 64))
    char = draw(st.sampled_from(["x", "é", "🙂", "ab "]))
    huge = char * (size // len(char.encode()))   # JSON escapes make some lines longer
    texts = ["before it", huge, "after it"]
    if kind in ("csv", "tsv"):
        records = [[t, 3] for t in texts]
    elif kind == "jsonl-2023":
        records = [{"rating": 3.0, "title": "", "text": t} for t in texts]
    else:
        records = [{"reviewText": t, "overall": 3} for t in texts]
    data = _render(kind, records, "\n").encode()
    if draw(st.booleans()):
        return NAMES[kind] + ".gz", gzip.compress(data, mtime=0, compresslevel=1)
    return NAMES[kind], data


# ------------------------------------------------------------------ helpers
def _write(name: str, data: bytes):
    folder = tempfile.TemporaryDirectory(prefix="rb-fuzz-")
    path = Path(folder.name) / name
    path.write_bytes(data)
    return folder, path


def _everything_keeps_the_contract(path: Path, splits: bool = True) -> None:
    """Every reader entry point over one file: plain, with titles, splits, preview."""
    read_contract(path)
    read_contract(path, prepend_title=True)
    if splits:
        splits_contract(path)
    only_data_errors(path, datafiles.preview, path, n=3)


# ------------------------------------------------------------------ properties
def _valid_files_read_back_exactly(f):
    name, data, options, expected = f
    folder, path = _write(name, data)
    with folder:
        rows = read_contract(path, **options)
        assert rows == expected
        if expected:
            report = DataReport()
            list(iter_reviews(path, None, report))
            assert report.files[0].skipped == {}  # nothing well-formed is ever skipped
        # pass 2 (evaluate --split all) finds every row pass 1 kept, in file order
        rep, chunks = unique_reviews([path], THREE, options=None) if not options else (None, None)
        if rep is not None:
            seen = {}
            for t, s in expected:
                seen.setdefault(t, set()).add(s)
            keep = [(t, s) for t, s in dict.fromkeys(expected) if len(seen[t]) == 1]  # first copy
            got = [(e.text, e.stars) for chunk in chunks for e in chunk]
            assert got == keep


def _random_records_keep_the_contract(f):
    folder, path = _write(*f)
    with folder:
        _everything_keeps_the_contract(path)


def _mangled_files_keep_the_contract(f):
    folder, path = _write(*f)
    with folder:
        _everything_keeps_the_contract(path)


def _raw_bytes_keep_the_contract(f):
    folder, path = _write(*f)
    with folder:
        _everything_keeps_the_contract(path, splits=False)


def _huge_fields_are_skipped_or_read(f):
    folder, path = _write(*f)
    with folder:
        rows = read_contract(path)
        assert rows is not None
        texts = [t for t, _ in rows]
        assert texts[0] == "before it" and texts[-1] == "after it"  # neighbours survive


test_valid_files_read_back_exactly, test_valid_files_read_back_exactly_fuzz = twins(
    _valid_files_read_back_exactly, f=valid_files())
test_random_records_keep_the_contract, test_random_records_keep_the_contract_fuzz = twins(
    _random_records_keep_the_contract, f=random_record_files())
test_mangled_files_keep_the_contract, test_mangled_files_keep_the_contract_fuzz = twins(
    _mangled_files_keep_the_contract, f=mangled(valid_files()))
(test_mangled_random_records_keep_the_contract,
 test_mangled_random_records_keep_the_contract_fuzz) = twins(
    _mangled_files_keep_the_contract, f=mangled(random_record_files()))
test_raw_bytes_keep_the_contract, test_raw_bytes_keep_the_contract_fuzz = twins(
    _raw_bytes_keep_the_contract, f=raw_bytes())
test_huge_fields_are_skipped_or_read, test_huge_fields_are_skipped_or_read_fuzz = twins(
    _huge_fields_are_skipped_or_read, f=huge_fields())


# ------------------------------------------- the streamed JSON document parser
class _Chunked:
    """A stream whose read1 hands out tiny chunks, so elements, strings, escapes and
    UTF-8 sequences are cut at every possible place."""

    def __init__(self, data: bytes, sizes: list[int]):
        self.data, self.sizes, self.pos, self.k = data, sizes, 0, 0

    def read1(self, n: int) -> bytes:
        size = min(n, self.sizes[self.k % len(self.sizes)])
        self.k += 1
        chunk = self.data[self.pos:self.pos + size]
        self.pos += len(chunk)
        return chunk


@st.composite
def json_documents(draw):
    """(bytes, chunk sizes): a JSON array of objects and junk, pretty-printed or not,
    maybe mangled (then it is usually not JSON any more)."""
    values = draw(st.lists(st.dictionaries(KEYS, JSON_VALUES, max_size=4) | JSON_VALUES,
                           max_size=8))
    indent = draw(st.sampled_from([None, 0, 2, "\t"]))
    data = json.dumps(values, indent=indent, ensure_ascii=draw(st.booleans())).encode()
    if draw(st.booleans()):
        data = draw(mangled(st.just(("doc.json", data))))[1]
    return data, draw(st.lists(st.integers(1, 40), min_size=1, max_size=8))


def _streamed_documents_match_json_loads(doc):
    """The streamed reader gives exactly the elements ``json.loads`` of the whole
    gives (the old reader loaded the whole document), or a DataError where it fails."""
    from reviewbert.data.read import _ArrayElements

    from fuzzing import time_limit

    data, sizes = doc
    try:
        whole = json.loads(data.decode("utf-8", "replace").removeprefix("\ufeff"))
        ok = isinstance(whole, list)
    except (ValueError, RecursionError):
        ok = False
    got = []
    try:
        with time_limit(what="streaming a JSON document"):
            got = [v for _, v in _ArrayElements(_Chunked(data, sizes), Path("doc.json"))]
    except DataError as e:
        assert not ok, f"DataError on a valid JSON array: {e}"
        assert "doc.json" in str(e)
        return
    assert ok, f"accepted what json.loads rejects: {data!r}"
    assert json.dumps(got) == json.dumps(whole)  # (NaN == NaN through dumps)


test_streamed_documents_match_json_loads, test_streamed_documents_match_json_loads_fuzz = twins(
    _streamed_documents_match_json_loads, doc=json_documents())


def test_min_tokens_without_a_tokenizer_uses_the_base_models(tmp_path):
    """build_splits(min_tokens=N) with no tokenizer loads the base model's (it once
    imported it from a module that does not exist)."""
    from reviewbert.data import build_splits

    from toyreviews import write_toy_csv
    toy = write_toy_csv(tmp_path / "toy.csv", n=100)
    splits = build_splits([toy], THREE, min_tokens=8)
    assert splits.report.skipped.get("too few tokens", 0) > 0 and splits.train
