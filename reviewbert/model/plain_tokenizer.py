"""A BERT checkpoint's tokenizer read with the ``tokenizers`` library alone, without
importing transformers: what the Predict page's first load needs, and all of it.

The app's background load got the tokenizer from ``AutoTokenizer.from_pretrained``. That
imports transformers, whose package index reads the source of every model it ships to
find their names (``define_import_structure``), and that import is most of the
tokenizer's load; the same ``tokenizer.json`` read through ``tokenizers`` alone takes a
small fraction of it. A click on Predict made while the model loads waits for it
(bench/first_second.py times the start-up and that early click).

The Predict page asks a tokenizer for one review's wordpieces, their character offsets
and words (:meth:`PlainTokenizer.encode_one`), token counts (``backend_tokenizer``, as
``data.splits`` counts them), ``model_max_length`` and ``pad_token_id``. Everything else
(batches, ``decode``, ``save_pretrained``, any other attribute) goes to transformers' own
tokenizer of the same folder, built the first time it is asked for
(:meth:`PlainTokenizer.hf`, ``checkpoint.hf_tokenizer``), as the transformers model is
(:attr:`reviewbert.model.inference.Predictor.model`).

:func:`read` accepts only what it reads exactly: a ``tokenizer.json`` that ``tokenizers``
parses, beside a ``tokenizer_config.json`` naming BERT's tokenizer, whose transformers
tokenizer is that file (truncation and padding off, as transformers sets them for a
call with ``truncation=False``). Anything else gives None and the checkpoint's tokenizer
is transformers' as before. tests/unit/test_plain_tokenizer.py compares the two on the
real data, on generated text and on the hostile texts.
"""
from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Callable

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"
TOKENIZER_CLASSES = ("BertTokenizer", "BertTokenizerFast")
NO_LIMIT = int(1e30)       # transformers' model_max_length when the config has none


class PlainTokenizer:
    """A checkpoint's ``tokenizer.json`` (see the module's docstring); transformers' own
    tokenizer behind it for anything but one review's encoding and token counts."""

    def __init__(self, folder: Path, backend, config: dict, load_hf: Callable[[Path], object]):
        backend.no_truncation()
        backend.no_padding()
        self.folder = Path(folder)
        self.backend_tokenizer = backend
        limit = config.get("model_max_length")
        self.model_max_length = int(limit) if isinstance(limit, (int, float)) and limit > 0 else NO_LIMIT
        pad = config.get("pad_token")
        self.pad_token_id = backend.token_to_id(pad) if isinstance(pad, str) else None
        self._load_hf = load_hf
        self._hf = None
        self._hf_lock = threading.Lock()

    def encode_one(self, text: str) -> tuple[list[int], list[tuple[int, int]], list[int | None], list[str]]:
        """(ids, character offsets, word ids, wordpieces) of ``text`` with [CLS] and [SEP],
        untruncated: what ``tokenizer(text, return_offsets_mapping=True)``, its
        ``word_ids()`` and ``convert_ids_to_tokens`` give."""
        enc = self.backend_tokenizer.encode(text, add_special_tokens=True)
        return enc.ids, [tuple(o) for o in enc.offsets], enc.word_ids, enc.tokens

    def hf(self):
        """transformers' tokenizer of the same folder, loaded once (whichever thread asks
        first); transformers is imported then."""
        if self._hf is None:
            with self._hf_lock:
                if self._hf is None:
                    self._hf = self._load_hf(self.folder)
        return self._hf

    def __call__(self, *args, **kwargs):
        return self.hf()(*args, **kwargs)

    def __getattr__(self, name: str):
        if name.startswith("__") or name in ("_hf", "_hf_lock", "_load_hf", "folder", "backend_tokenizer"):
            raise AttributeError(name)
        return getattr(self.hf(), name)

    def __len__(self) -> int:
        return len(self.hf())

    def __repr__(self) -> str:
        return f"PlainTokenizer({str(self.folder)!r})"


def what_transformers_builds(config: dict, vocab: dict) -> dict:
    """The parts of ``tokenizer.json`` that transformers' ``BertTokenizer`` builds from
    ``tokenizer_config.json`` instead of reading them (transformers 5: its ``__init__``),
    as they appear in the file: the file is read plain only if it says the same."""
    cls, sep = str(config.get("cls_token", "[CLS]")), str(config.get("sep_token", "[SEP]"))
    return {
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": config.get("tokenize_chinese_chars", True),
                       "strip_accents": config.get("strip_accents"),
                       "lowercase": config.get("do_lower_case", True)},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "model": {"type": "WordPiece", "unk_token": str(config.get("unk_token", "[UNK]")),
                  "continuing_subword_prefix": "##", "max_input_chars_per_word": 100},
        "post_processor.single": [{"SpecialToken": {"id": cls, "type_id": 0}},
                                  {"Sequence": {"id": "A", "type_id": 0}},
                                  {"SpecialToken": {"id": sep, "type_id": 0}}],
        "post_processor.ids": {cls: [vocab.get(cls)], sep: [vocab.get(sep)]},
    }


def _as_read(data: dict) -> dict:
    model = {k: v for k, v in (data.get("model") or {}).items() if k != "vocab"}
    post = data.get("post_processor") or {}
    return {
        "normalizer": data.get("normalizer"),
        "pre_tokenizer": data.get("pre_tokenizer"),
        "model": model,
        "post_processor.single": post.get("single") if post.get("type") == "TemplateProcessing" else None,
        "post_processor.ids": {k: v.get("ids") for k, v in (post.get("special_tokens") or {}).items()
                               if isinstance(v, dict)},
    }


def _added_tokens_agree(config: dict, data: dict) -> bool:
    """Every token tokenizer_config.json adds is in tokenizer.json with the same id, and it
    adds no special tokens of its own beyond BERT's five."""
    added = {t.get("content"): t.get("id") for t in data.get("added_tokens") or [] if isinstance(t, dict)}
    decoder = config.get("added_tokens_decoder") or {}
    if not isinstance(decoder, dict):
        return False
    for key, token in decoder.items():
        if not isinstance(token, dict) or added.get(token.get("content")) != int(key):
            return False
    return not (config.get("additional_special_tokens") or config.get("extra_special_tokens"))


def read(folder: str | Path, load_hf: Callable[[Path], object]) -> PlainTokenizer | None:
    """The folder's tokenizer as a :class:`PlainTokenizer`, or None for one it does not
    read exactly (then transformers loads it, with its own checks and messages).
    ``load_hf(folder)`` builds transformers' tokenizer when it is asked for
    (``checkpoint.hf_tokenizer``)."""
    folder = Path(folder)
    try:
        config = json.loads((folder / CONFIG_FILE).read_text(encoding="utf-8"))
        text = (folder / TOKENIZER_FILE).read_text(encoding="utf-8")
        data = json.loads(text)
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict) or not isinstance(data, dict):
        return None
    if config.get("tokenizer_class") not in TOKENIZER_CLASSES:
        return None
    try:
        vocab = (data.get("model") or {}).get("vocab") or {}
        if _as_read(data) != what_transformers_builds(config, vocab):
            return None
        if not _added_tokens_agree(config, data):
            return None
        from tokenizers import Tokenizer
        backend = Tokenizer.from_str(text)
    except Exception:  # noqa: BLE001 - anything it cannot read exactly: transformers' turn
        return None
    return PlainTokenizer(folder, backend, config, load_hf)
