"""plain_tokenizer.py: a checkpoint's tokenizer without importing transformers.

It must encode exactly what transformers' tokenizer of the same folder encodes (ids,
offsets, words, wordpieces, truncation included), hand everything else to that
tokenizer, and read nothing that transformers would build differently: such a folder
gets transformers' tokenizer, as before.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import strategies as st

from reviewbert.errors import CheckpointError
from reviewbert.model import plain_tokenizer
from reviewbert.model.checkpoint import PLAIN_LOAD_ENV, hf_tokenizer
from reviewbert.model.inference import Predictor, encode
from reviewbert.model.plain_tokenizer import PlainTokenizer

from fuzzing import twins
from hostile_texts import CORPUS

ROOT = Path(__file__).resolve().parents[2]
TEXTS = ["Great phone, the battery lasts two days.", "", " ", "\x00\u200b\ufeff", "İstanbul ﬁ Ǆ ß",
         "日本語のテキスト、中文", "e\u0301 café naïve", "[CLS] [SEP] [MASK] [unk] [PAD] [pad]",
         "a" * 300 + " b", "\r\n\t\x0b", "🙂👍🏽 \u200d", "don't can't won't!!! ...", "x" * 5000,
         "The   spaces\u00a0and\u2028lines"] + [h.text for h in CORPUS]


def _pair(d: Path):
    plain = plain_tokenizer.read(d, hf_tokenizer)
    assert isinstance(plain, PlainTokenizer), d
    return plain, hf_tokenizer(d)


def _same_encoding(plain, hf, text: str, max_length: int = 64) -> None:
    assert encode(plain, text, max_length) == encode(hf, text, max_length), repr(text[:80])


@pytest.mark.parametrize("where", ["tiny", "demo"])
def test_it_encodes_exactly_what_transformers_encodes(where, tiny_model_dir):
    d = tiny_model_dir if where == "tiny" else ROOT / "checkpoints" / "demo"
    plain, hf = _pair(d)
    for text in TEXTS:
        for max_length in (8, 64, 512):       # truncated (the last slot back to [SEP]) and not
            _same_encoding(plain, hf, text, max_length)
    assert plain.model_max_length == hf.model_max_length
    assert plain.pad_token_id == hf.pad_token_id
    assert plain.backend_tokenizer.truncation is None and plain.backend_tokenizer.padding is None


def test_everything_else_goes_to_transformers_tokenizer(tiny_model_dir):
    plain, hf = _pair(tiny_model_dir)
    ids = hf("battery life")["input_ids"]
    assert plain("battery life")["input_ids"] == ids      # a call: transformers' own
    assert plain.decode(ids) == hf.decode(ids)
    assert plain.convert_ids_to_tokens(ids) == hf.convert_ids_to_tokens(ids)
    assert len(plain) == len(hf)
    assert plain.hf() is plain.hf(), "built once"


def _edit(d: Path, name: str, **fields) -> None:
    data = json.loads((d / name).read_text())
    data.update(fields)
    (d / name).write_text(json.dumps(data))


def _edit_tokenizer_json(d: Path, path: tuple, value) -> None:
    data = json.loads((d / "tokenizer.json").read_text())
    node = data
    for k in path[:-1]:
        node = node[k]
    node[path[-1]] = value
    (d / "tokenizer.json").write_text(json.dumps(data))


NOT_PLAIN = {
    "cased in its config": lambda d: _edit(d, "tokenizer_config.json", do_lower_case=False),
    "accents stripped in its config": lambda d: _edit(d, "tokenizer_config.json", strip_accents=True),
    "Chinese characters not split": lambda d: _edit(d, "tokenizer_config.json", tokenize_chinese_chars=False),
    "another tokenizer class": lambda d: _edit(d, "tokenizer_config.json",
                                               tokenizer_class="RobertaTokenizer"),
    "another unknown token": lambda d: _edit(d, "tokenizer_config.json", unk_token="[MASK]"),
    "an extra special token": lambda d: _edit(d, "tokenizer_config.json",
                                              additional_special_tokens=["[NEW]"]),
    "an added token the file lacks": lambda d: _edit(d, "tokenizer_config.json", added_tokens_decoder={
        "30522": {"content": "[NEW]", "special": True, "lstrip": False, "rstrip": False,
                  "normalized": False, "single_word": False}}),
    "a cased normalizer in the file": lambda d: _edit_tokenizer_json(d, ("normalizer", "lowercase"), False),
    "another pre-tokenizer": lambda d: _edit_tokenizer_json(d, ("pre_tokenizer",), {"type": "Whitespace"}),
    "a longer word limit": lambda d: _edit_tokenizer_json(d, ("model", "max_input_chars_per_word"), 7),
    "no [SEP] at the end": lambda d: _edit_tokenizer_json(d, ("post_processor", "single"), [
        {"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}]),
    "no tokenizer.json": lambda d: (d / "tokenizer.json").unlink(),
    "a truncated tokenizer.json": lambda d: (d / "tokenizer.json").write_text(
        (d / "tokenizer.json").read_text()[:5000]),
    "a tokenizer_config.json that is a list": lambda d: (d / "tokenizer_config.json").write_text("[1, 2]"),
}


@pytest.mark.parametrize("name", NOT_PLAIN)
def test_what_it_does_not_read_exactly_goes_to_transformers_as_before(
        name, tiny_model_dir, tmp_path, monkeypatch):
    """Refused here; the app's load then gives what transformers' load alone gives: the
    same predictions, or the same error."""
    d = shutil.copytree(tiny_model_dir, tmp_path / "ckpt")
    NOT_PLAIN[name](d)
    assert plain_tokenizer.read(d, hf_tokenizer) is None
    outcomes = []
    for env in ("1", "0"):
        monkeypatch.setenv(PLAIN_LOAD_ENV, env)
        try:
            p = Predictor.from_checkpoint(d, "cpu")
            pred = p.predict("Great phone, naïve café, 日本")
            outcomes.append(("loaded", type(p.tokenizer).__name__ != "PlainTokenizer",
                             pred.tokens, pred.probs.round(6).tolist()))
        except (CheckpointError, ValueError, OSError) as e:
            outcomes.append((type(e).__name__, str(e)))
    assert outcomes[0] == outcomes[1], outcomes


def test_cased_config_would_have_encoded_differently(tiny_model_dir, tmp_path):
    """Why the check is there: transformers builds the normalizer from the config."""
    d = shutil.copytree(tiny_model_dir, tmp_path / "ckpt")
    _edit(d, "tokenizer_config.json", do_lower_case=False)
    raw = plain_tokenizer.PlainTokenizer(d, __import__("tokenizers").Tokenizer.from_file(
        str(d / "tokenizer.json")), json.loads((d / "tokenizer_config.json").read_text()), hf_tokenizer)
    assert encode(raw, "Great PHONE", 16) != encode(hf_tokenizer(d), "Great PHONE", 16)


def test_the_predict_path_never_imports_transformers():
    """The shipped demo loaded, warmed, asked for a prediction and its test split as the
    app's background load does: transformers is not imported (1.6 s on a 2-core CPU)
    until something asks the tokenizer for more."""
    code = (
        "import sys, json, torch\n"
        "from reviewbert.server.model_loading import load_predictor, load_test_split\n"
        "p = load_predictor('checkpoints/demo')\n"
        "p.predict('Great phone, the battery lasts two days.')\n"
        "reviews, why = load_test_split('checkpoints/demo', p.tokenizer)\n"
        "print(len(reviews or ()), 'transformers' in sys.modules)\n"
        "p.tokenizer.decode([101, 102])\n"
        "print('transformers' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    first, after = out.stdout.strip().splitlines()[-2:]
    n, imported = first.split()
    assert imported == "False" and after == "True", out.stdout
    assert int(n) > 0 or not (ROOT.parent / "shared" / "data").exists()


_FUZZ = {}


def _same_on_any_text(tiny_model_dir, text, max_length):
    if "pair" not in _FUZZ:
        _FUZZ["pair"] = _pair(tiny_model_dir)
    _same_encoding(*_FUZZ["pair"], text, max_length)


test_any_text_encodes_as_transformers_encodes, test_any_text_encodes_as_transformers_encodes_fuzz = twins(
    _same_on_any_text, text=st.text(max_size=200), max_length=st.integers(3, 80))
