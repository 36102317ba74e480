"""One sentence through the real model, step by step: the tensors of the "Inside BERT" page.

The fast predict path (:class:`~reviewbert.model.inference.FastBertForward`) fuses Q, K
and V into one matmul and skips most of the last layer, so it cannot show the
steps. :func:`trace` runs the same arithmetic on the eager Hugging Face modules,
calling each submodule itself: the three embedding tables and their LayerNorm,
each layer's ``query``/``key``/``value`` Linear layers, softmax(QKᵀ/√d), the
output projection, add & norm, the feed-forward block, the pooler and the
classifier. Calling the submodules (instead of ``model(..., output_attentions=True)``
with hooks) leaves the shared, cached model untouched: no config flags are
flipped, no hooks are registered, so another session predicting at the same
time sees nothing.

What a :class:`Trace` keeps, for one sequence of ``T`` tokens (``L`` layers,
``H`` heads of ``d`` dimensions, hidden size ``D = H·d``, ``C`` classes), all
float32 numpy:

- ``token_emb``, ``position_emb``, ``segment_emb``, ``emb_sum``: ``[T, D]``
- ``hidden_states``: ``[L + 1, T, D]``; 0 is the embedding output (after LayerNorm)
- ``query``, ``key``, ``value``: ``[L, H, T, d]``; ``attentions``: ``[L, H, T, T]``
- ``step_norms``: ``[L, len(LAYER_STEPS), T]``, each token's vector norm after
  each step of a layer (the matrices themselves are rebuilt for one layer by
  :func:`layer_detail`, which keeps a trace of a long review small)
- ``pooled_pre``, ``pooled``: ``[D]`` (the pooler's dense layer, then tanh);
  ``logits``, ``probs``: ``[C]``

Every size comes from ``model.config`` (:class:`Dims`): 384 = 12 × 32 for MiniLM,
768 = 12 × 64 for bert-base. Nothing here draws or imports Streamlit; the figures
are in ``reviewbert/anatomy/figures.py``, the page in ``pages/inside_bert.py`` (its parts in
``reviewbert/ui/inside_bert.py``).

Supported: ``BertForSequenceClassification`` with absolute positions (every
ReviewBERT checkpoint); :func:`unsupported_reason` says why another model is not.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from reviewbert.model.checkpoint import resolve_base_model
from reviewbert.model.inference import encode

LAYER_STEPS = ("input", "heads concatenated", "output projection", "add & norm 1",
               "feed-forward expand", "activation", "feed-forward back", "add & norm 2")
"""The steps of one encoder layer, in order; ``Trace.step_norms`` follows it."""

POSITIONS_SHOWN = 64
"""Position embeddings compared in the learned-positions panel (cosine matrix)."""

SHARED_WORD_SENTENCES = (
    ("flies", ("time flies like an arrow", "fruit flies like a banana")),
    ("bank", ("he withdrew money from the bank", "they sat on the river bank")),
)
"""Step 5's default comparisons: a word, and sentences that use it in two senses."""

UNUSUAL_WORD = "unboxing"
"""Shown split into WordPieces when the sentence itself has no split word."""


# ---------------------------------------------------------------------- dims
@dataclass(frozen=True)
class Dims:
    hidden: int
    heads: int
    head_dim: int
    intermediate: int
    layers: int
    vocab: int
    max_positions: int
    segments: int
    num_labels: int
    activation: str

    @classmethod
    def of(cls, model) -> "Dims":
        c = model.config
        return cls(hidden=c.hidden_size, heads=c.num_attention_heads,
                   head_dim=c.hidden_size // c.num_attention_heads,
                   intermediate=c.intermediate_size, layers=c.num_hidden_layers,
                   vocab=c.vocab_size, max_positions=c.max_position_embeddings,
                   segments=c.type_vocab_size, num_labels=c.num_labels,
                   activation=str(c.hidden_act))


def unsupported_reason(model) -> str | None:
    """None if :func:`trace` can take this model apart, else a sentence saying why not."""
    cfg = model.config
    name = type(model).__name__
    if getattr(cfg, "model_type", None) != "bert" or name != "BertForSequenceClassification":
        return (f"The step-by-step view takes a BERT classifier apart module by module; "
                f"this checkpoint is a {name} ({getattr(cfg, 'model_type', '?')}).")
    if getattr(cfg, "position_embedding_type", "absolute") != "absolute":
        return "This checkpoint uses relative positions; the steps show absolute ones only."
    if getattr(cfg, "is_decoder", False):
        return "This checkpoint is a decoder (causal attention); the steps show an encoder."
    if getattr(cfg, "pruned_heads", None):
        return ("This checkpoint has heads removed (`reviewbert heads prune`), so its layers "
                "have different numbers of heads; the steps show full-size layers only. The "
                "Predict, Error analysis and Heads pages read it.")
    return None


# --------------------------------------------------------------------- trace
@dataclass
class Trace:
    text: str
    ids: list[int]
    tokens: list[str]
    word_ids: list[int | None]
    words: list[str]
    segment_ids: list[int]
    truncated: bool
    n_tokens_original: int
    dims: Dims
    label_names: list[str]
    token_emb: np.ndarray
    position_emb: np.ndarray
    segment_emb: np.ndarray
    emb_sum: np.ndarray
    hidden_states: np.ndarray
    query: np.ndarray
    key: np.ndarray
    value: np.ndarray
    attentions: np.ndarray
    step_norms: np.ndarray
    pooled_pre: np.ndarray | None      # None: the model has no pooler, [CLS] goes straight on
    pooled: np.ndarray
    logits: np.ndarray
    probs: np.ndarray
    scaling: float                     # the 1/√d the model multiplies QKᵀ by

    @property
    def n_tokens(self) -> int:
        return len(self.ids)

    @property
    def embedding_output(self) -> np.ndarray:
        return self.hidden_states[0]

    @property
    def cls_vector(self) -> np.ndarray:
        """The last layer's [CLS] row: all the classifier reads."""
        return self.hidden_states[-1, 0]


def _np(t: torch.Tensor) -> np.ndarray:
    return t.detach().to(torch.float32).cpu().numpy()


def _layer(layer, x: torch.Tensor, dims: Dims) -> dict[str, torch.Tensor]:
    """One encoder layer on ``x`` [T, D], step by step, with the layer's own modules."""
    T, H, d = x.shape[0], dims.heads, dims.head_dim
    a = layer.attention.self
    q = a.query(x).view(T, H, d).transpose(0, 1)            # [H, T, d]
    k = a.key(x).view(T, H, d).transpose(0, 1)
    v = a.value(x).view(T, H, d).transpose(0, 1)
    scaling = float(getattr(a, "scaling", d ** -0.5))
    # Same order as transformers' eager attention: (Q·Kᵀ)·scale, then a row-wise softmax.
    att = torch.softmax(torch.matmul(q, k.transpose(1, 2)) * scaling, dim=-1)
    concat = torch.matmul(att, v).transpose(0, 1).reshape(T, dims.hidden)
    o = layer.attention.output
    proj = o.dense(concat)
    h1 = o.LayerNorm(proj + x)
    expand = layer.intermediate.dense(h1)
    act = layer.intermediate.intermediate_act_fn(expand)
    back = layer.output.dense(act)
    h2 = layer.output.LayerNorm(back + h1)
    steps = [x, concat, proj, h1, expand, act, back, h2]           # in LAYER_STEPS' order
    return dict(q=q, k=k, v=v, att=att, scaling=scaling, steps=steps)


@torch.inference_mode()
def trace(model, tokenizer, text: str, max_length: int) -> Trace:
    """``text`` through ``model``, every intermediate kept (see the module docstring).

    Tokenised exactly as :meth:`Predictor.predict` does (same cut to ``max_length``),
    so every number here belongs to the prediction the main page shows.
    """
    if not isinstance(text, str) or not text.strip():
        raise ValueError("empty sentence: type a sentence first")
    why = unsupported_reason(model)
    if why:
        raise ValueError(why)
    dims = Dims.of(model)
    enc = encode(tokenizer, text, max_length)
    device = next(model.parameters()).device
    ids = torch.tensor(enc.ids, dtype=torch.long, device=device)
    T = len(enc.ids)
    segments = torch.zeros(T, dtype=torch.long, device=device)   # one sentence: segment A
    emb = model.bert.embeddings
    tok = emb.word_embeddings(ids)
    seg = emb.token_type_embeddings(segments)
    pos = emb.position_embeddings(torch.arange(T, device=device))
    total = (tok + seg) + pos                                      # transformers' order of sums
    x = emb.LayerNorm(total)

    hidden, qs, ks, vs, atts, norms = [x], [], [], [], [], []
    scaling = dims.head_dim ** -0.5
    for layer in model.bert.encoder.layer:
        r = _layer(layer, x, dims)
        x = r["steps"][-1]
        scaling = r["scaling"]
        hidden.append(x)
        qs.append(r["q"])
        ks.append(r["k"])
        vs.append(r["v"])
        atts.append(r["att"])
        norms.append(torch.stack([s.norm(dim=-1) for s in r["steps"]]))

    pooler = getattr(model.bert, "pooler", None)
    if pooler is not None:
        pooled_pre = pooler.dense(x[0])
        pooled = pooler.activation(pooled_pre)
    else:
        pooled_pre, pooled = None, x[0]
    logits = model.classifier(pooled)
    probs = torch.softmax(logits.float(), dim=-1)
    names = [model.config.id2label[i] for i in range(dims.num_labels)]
    return Trace(
        text=enc.text, ids=list(enc.ids), tokens=list(enc.tokens), word_ids=list(enc.word_ids),
        words=list(enc.words), segment_ids=[0] * T, truncated=enc.truncated,
        n_tokens_original=enc.n_original, dims=dims, label_names=names,
        token_emb=_np(tok), position_emb=_np(pos), segment_emb=_np(seg), emb_sum=_np(total),
        hidden_states=_np(torch.stack(hidden)), query=_np(torch.stack(qs)),
        key=_np(torch.stack(ks)), value=_np(torch.stack(vs)), attentions=_np(torch.stack(atts)),
        step_norms=_np(torch.stack(norms)),
        pooled_pre=None if pooled_pre is None else _np(pooled_pre), pooled=_np(pooled),
        logits=_np(logits), probs=_np(probs), scaling=scaling)


# ------------------------------------------------------------------ step 1
@dataclass
class Split:
    word: str
    pieces: list[str]
    ids: list[int]
    in_sentence: bool


def word_splits(trace: Trace, tokenizer, extra: str = UNUSUAL_WORD) -> list[Split]:
    """Words of the sentence that became several WordPieces; ``extra`` too if none did."""
    out: list[Split] = []
    for w, word in enumerate(trace.words):
        idx = [i for i, wid in enumerate(trace.word_ids) if wid == w]
        if len(idx) > 1:
            out.append(Split(word, [trace.tokens[i] for i in idx], [trace.ids[i] for i in idx], True))
    if not out and extra:
        ids = tokenizer(extra, add_special_tokens=False)["input_ids"]
        out.append(Split(extra, tokenizer.convert_ids_to_tokens(ids), list(ids), False))
    return out


# ------------------------------------------------------------------ step 2
@torch.inference_mode()
def position_similarity(model, n: int = POSITIONS_SHOWN) -> np.ndarray:
    """Cosine similarity of the first ``n`` learned position embeddings, ``[n, n]``."""
    p = model.bert.embeddings.position_embeddings.weight[:n].float()
    p = torch.nn.functional.normalize(p, dim=-1)
    return _np(p @ p.T)


@torch.inference_mode()
def embeddings_max_diff(model, trace: Trace) -> float:
    """|the traced sum + LayerNorm − the model's own embedding module|, the largest entry."""
    ids = torch.tensor([trace.ids], device=next(model.parameters()).device)
    own = _np(model.bert.embeddings(input_ids=ids)[0])
    return float(np.abs(own - trace.embedding_output).max())


# ------------------------------------------------------------------ step 3
@dataclass
class HeadStep:
    layer: int
    head: int
    query: np.ndarray      # [T, d]
    key: np.ndarray        # [T, d]
    value: np.ndarray      # [T, d]
    scores: np.ndarray     # [T, T] QKᵀ/√d
    attention: np.ndarray  # [T, T] softmax of each row: the "attention filter"
    filtered: np.ndarray   # [T, d] attention · V: the "filtered values"
    scaling: float


def head_step(trace: Trace, layer: int, head: int) -> HeadStep:
    """One head of one layer, by hand in numpy from the traced Q, K and V."""
    q = trace.query[layer, head].astype(np.float64)
    k = trace.key[layer, head].astype(np.float64)
    v = trace.value[layer, head].astype(np.float64)
    scores = (q @ k.T) * trace.scaling
    e = np.exp(scores - scores.max(axis=1, keepdims=True))   # minus the row max: no overflow
    att = e / e.sum(axis=1, keepdims=True)
    f32 = np.float32
    return HeadStep(layer, head, q.astype(f32), k.astype(f32), v.astype(f32), scores.astype(f32),
                    att.astype(f32), (att @ v).astype(f32), trace.scaling)


# ------------------------------------------------------------------ step 4
@dataclass
class LayerDetail:
    layer: int
    names: tuple[str, ...]
    matrices: list[np.ndarray]     # one per name: [T, D] or [T, intermediate]
    norms: np.ndarray              # [len(names), T]
    max_diff_to_trace: float       # the rebuilt output against the traced hidden state

    @property
    def shapes(self) -> list[tuple[int, int]]:
        return [tuple(m.shape) for m in self.matrices]


@torch.inference_mode()
def layer_detail(model, trace: Trace, layer: int) -> LayerDetail:
    """Every step's matrix of one layer, rebuilt from the traced input of that layer."""
    device = next(model.parameters()).device
    x = torch.from_numpy(trace.hidden_states[layer]).to(device)
    steps = [_np(s) for s in _layer(model.bert.encoder.layer[layer], x, trace.dims)["steps"]]
    diff = float(np.abs(steps[-1] - trace.hidden_states[layer + 1]).max())
    return LayerDetail(layer, LAYER_STEPS, steps, trace.step_norms[layer], diff)


# ------------------------------------------------------------------ step 5
@dataclass
class WordInContext:
    word: str
    sentences: list[str]
    pieces: list[list[str]]       # the word's WordPieces in each sentence
    layer_names: list[str]        # "static token embedding", "input embeddings", "layer 1", …
    vectors: np.ndarray           # [S, K, D]: the word's vector (mean of its pieces) per stage
    similarity: np.ndarray        # [K, S, S] cosine between sentences at each stage
    pca: np.ndarray               # [S, K, 2] unit vectors projected on their top 2 components
    explained: np.ndarray         # [2] variance ratio of those components

    def pair_similarity(self, i: int = 0, j: int = 1) -> np.ndarray:
        """[K]: the cosine between sentence ``i`` and ``j`` at each stage."""
        return self.similarity[:, i, j]


def find_word(tokenizer, sentence: str, word: str) -> list[int]:
    """Token positions (with [CLS] at 0) of the first occurrence of ``word``; [] if absent."""
    enc = tokenizer(sentence, add_special_tokens=True, return_offsets_mapping=True, verbose=False)
    want = word.strip().lower()
    spans: dict[int, list[int]] = {}
    for i, w in enumerate(enc.word_ids()):
        if w is not None:
            spans.setdefault(w, []).append(i)
    for idx in spans.values():
        s, e = enc["offset_mapping"][idx[0]][0], enc["offset_mapping"][idx[-1]][1]
        if sentence[s:e].lower() == want:
            return idx
    return []


def shared_words(tokenizer, sentences: list[str]) -> list[str]:
    """Words (lower-cased, in the first sentence's order) that every sentence contains."""
    def words(s: str) -> list[str]:
        enc = tokenizer(s, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
        spans: dict[int, list[int]] = {}
        for i, w in enumerate(enc.word_ids()):
            if w is not None:
                spans.setdefault(w, []).append(i)
        off = enc["offset_mapping"]
        return [s[off[ix[0]][0]:off[ix[-1]][1]].lower() for ix in spans.values()]
    if not sentences:
        return []
    rest = [set(words(s)) for s in sentences[1:]]
    out: list[str] = []
    for w in words(sentences[0]):
        if w not in out and all(w in r for r in rest) and any(c.isalnum() for c in w):
            out.append(w)
    return out


def _pca2(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    centred = points - points.mean(axis=0, keepdims=True)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    var = s ** 2
    ratio = var[:2] / var.sum() if var.sum() > 0 else np.zeros(2)
    proj = centred @ vt[:2].T
    if proj.shape[1] < 2:                       # one point, or all identical
        proj = np.pad(proj, ((0, 0), (0, 2 - proj.shape[1])))
        ratio = np.pad(ratio, (0, 2 - len(ratio)))
    return proj, ratio


def word_in_context(model, tokenizer, sentences: list[str], word: str,
                    max_length: int = 128) -> WordInContext:
    """The same word's vector in several sentences, stage by stage, and how alike they are.

    Stage 0 is the static token embedding (the word2vec-like lookup: identical in
    every sentence), stage 1 the input embeddings (+ position and segment, after
    LayerNorm: a word at a different position already differs a little), then the
    output of each layer. A word of several pieces is the mean of its pieces.
    """
    sentences = [s for s in (s.strip() for s in sentences) if s]
    if len(sentences) < 2:
        raise ValueError("give at least two sentences")
    if not word.strip():
        raise ValueError("name the word the sentences share")
    per_sentence, pieces = [], []
    for n, s in enumerate(sentences, start=1):
        idx = find_word(tokenizer, s, word)
        if not idx:
            raise ValueError(f"“{word}” is not a word of sentence {n} (“{s}”)")
        tr = trace(model, tokenizer, s, max_length)
        idx = [i for i in idx if i < tr.n_tokens - 1]
        if not idx:
            raise ValueError(f"“{word}” is past the {max_length}-token limit in sentence {n}")
        stages = np.concatenate([tr.token_emb[None], tr.hidden_states])     # [K, T, D]
        per_sentence.append(stages[:, idx].mean(axis=1))
        pieces.append([tr.tokens[i] for i in idx])
    vec = np.stack(per_sentence)                                              # [S, K, D]
    unit = vec / np.maximum(np.linalg.norm(vec, axis=-1, keepdims=True), 1e-12)
    sim = np.einsum("skd,tkd->kst", unit.astype(np.float64), unit.astype(np.float64))
    S, K, D = vec.shape
    proj, ratio = _pca2(unit.reshape(S * K, D).astype(np.float64))
    names = (["static token embedding", "input embeddings"]
             + [f"layer {i}" for i in range(1, K - 1)])
    return WordInContext(word.strip(), sentences, pieces, names, vec, sim.astype(np.float32),
                         proj.reshape(S, K, 2).astype(np.float32), ratio.astype(np.float32))


def describe_drift(ctx: WordInContext) -> str:
    """What the numbers say, in one or two plain sentences, whatever they are."""
    S = len(ctx.sentences)
    iu = np.triu_indices(S, 1)
    mean = np.array([ctx.similarity[k][iu].mean() for k in range(len(ctx.layer_names))])
    start, last = float(mean[0]), float(mean[-1])
    low = int(mean.argmin())
    pairs = "the two sentences" if S == 2 else f"the {S} sentences (mean over pairs)"
    text = (f"“{ctx.word}” has the same static vector in {pairs} (cosine {start:.2f}); "
            f"after the last layer the cosine is {last:.2f}")
    if low != len(mean) - 1 and mean[low] < last - 0.02:
        text += f", lowest at {ctx.layer_names[low]} ({mean[low]:.2f})"
    if last < start - 0.1:
        text += ": in this model, the context pulled the two uses apart."
    elif last < start - 0.02:
        text += ": in this model the vectors moved apart only a little."
    else:
        text += ": in this model the context barely changed the word's vector."
    return text


# ------------------------------------------------------------------ step 6
@dataclass
class ClsStep:
    cls_vector: np.ndarray          # [D] last layer, position 0
    pooler_shape: tuple[int, int] | None
    pooled_pre: np.ndarray | None   # [D] dense(cls)
    pooled: np.ndarray              # [D] tanh(dense(cls))
    weight: np.ndarray              # [C, D] classifier
    bias: np.ndarray                # [C]
    logits: np.ndarray              # [C] weight · pooled + bias, by hand
    probs: np.ndarray               # [C] softmax(logits), by hand
    names: list[str]


def cls_step(model, trace: Trace) -> ClsStep:
    """[CLS] → pooler → classifier → softmax, redone by hand in numpy from the weights."""
    W = _np(model.classifier.weight).astype(np.float64)
    b = _np(model.classifier.bias).astype(np.float64)
    pooler = getattr(model.bert, "pooler", None)
    cls = trace.cls_vector.astype(np.float64)
    if pooler is not None:
        Wp = _np(pooler.dense.weight).astype(np.float64)
        pre = Wp @ cls + _np(pooler.dense.bias)
        pooled = np.tanh(pre)
        shape = tuple(Wp.shape)
    else:
        pre, pooled, shape = None, cls, None
    logits = W @ pooled + b
    e = np.exp(logits - logits.max())
    f32 = np.float32
    return ClsStep(cls.astype(f32), shape, None if pre is None else pre.astype(f32),
                   pooled.astype(f32), W.astype(f32), b.astype(f32), logits.astype(f32),
                   (e / e.sum()).astype(f32), list(trace.label_names))


# ------------------------------------------------------------------ step 7
@dataclass
class MlmStatus:
    available: bool
    message: str
    path: str | None = None


def _local_folder(name: str) -> Path | None:
    """A local folder for ``name``: a path, or the Hugging Face cache. Never downloads."""
    try:
        resolved = resolve_base_model(name)
    except Exception:  # noqa: BLE001 - e.g. the embedded package is missing
        return None
    if Path(resolved).is_dir():
        return Path(resolved)
    try:
        from huggingface_hub import snapshot_download
        return Path(snapshot_download(resolved, local_files_only=True))
    except Exception:  # noqa: BLE001 - not in the cache, or not a valid repo id
        return None


def _weight_names(folder: Path) -> list[str]:
    from safetensors import safe_open
    names: list[str] = []
    for f in sorted(folder.glob("*.safetensors")):
        with safe_open(str(f), "pt") as st:
            names.extend(st.keys())
    return names  # pickle weights (pytorch_model.bin) are never opened, not even to list them


def mlm_status(base_model: str | None) -> MlmStatus:
    """Whether ``base_model`` is on this machine with its masked-LM head. Never fails;
    ``message`` completes "Step 7 is hidden: …"."""
    if not base_model or base_model == "?":
        return MlmStatus(False, "this checkpoint does not say which base model it was "
                                "fine-tuned from, so there is no masked-language-model head to ask.")
    folder = _local_folder(base_model)
    if folder is None:
        return MlmStatus(False, f"the base model `{base_model}` is not on this machine (and it "
                                "is never downloaded here).")
    try:
        names = _weight_names(folder)
    except Exception as e:  # noqa: BLE001 - unreadable weights: say so, do not fail the page
        return MlmStatus(False, f"the base model's weights in `{folder}` could not be read "
                                f"({type(e).__name__}).")
    if not names:
        return MlmStatus(False, f"the base model in `{folder}` has no .safetensors weights "
                                "(ReviewBERT never loads pickle files such as pytorch_model.bin).")
    if not any(n.startswith(("cls.predictions.", "predictions.")) for n in names):
        return MlmStatus(False, f"the base model `{base_model}` has no masked-language-model "
                                "head (its pre-training head was not kept), so it cannot fill "
                                "in [MASK].")
    return MlmStatus(True, f"the base model `{base_model}` has its masked-language-model head.",
                     str(folder))


def load_mlm(path: str):
    """(model, tokenizer) of a local masked LM. ``local_files_only``: nothing is downloaded
    (not HF_HUB_OFFLINE: setting it would also stop the Train page fetching a base model)."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForMaskedLM.from_pretrained(path, local_files_only=True, use_safetensors=True,
                                                 dtype=torch.float32)
    return model.eval(), tok


@dataclass
class MaskFill:
    position: int                      # token index of the [MASK]
    candidates: list[tuple[str, float]]


@torch.inference_mode()
def fill_mask(model, tokenizer, text: str, k: int = 5) -> list[MaskFill]:
    """Top-``k`` words for each [MASK] in ``text``; [] when there is none."""
    mask = tokenizer.mask_token or "[MASK]"
    text = text.replace("[MASK]", mask)
    enc = tokenizer(text, return_tensors="pt", truncation=True, max_length=128)
    ids = enc["input_ids"][0]
    where = (ids == tokenizer.mask_token_id).nonzero().flatten().tolist()
    if not where:
        return []
    logits = model(**enc).logits[0]
    out = []
    for i in where:
        p = torch.softmax(logits[i].float(), dim=-1)
        top = torch.topk(p, k)
        out.append(MaskFill(i, [(tokenizer.convert_ids_to_tokens(int(t)), float(v))
                                for v, t in zip(top.values, top.indices)]))
    return out


def masked_default(sentence: str) -> str:
    """The sentence with its last word masked ("time flies like an [MASK]")."""
    words = sentence.split()
    if len(words) < 2:
        return "time flies like an [MASK] ."
    return " ".join(words[:-1] + ["[MASK]"])

