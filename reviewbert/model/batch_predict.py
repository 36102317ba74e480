"""Batched prediction over many reviews: training-time evaluation, the CLI, the pages' whole
splits and the benchmarks.

Reviews are tokenized once, up front, to lists of ids (no padding). A batch is
padded only to its own longest review ("dynamic padding"), and evaluation walks
the reviews sorted by length, so a batch of short reviews costs what short
reviews cost. On this data most reviews are far shorter than 256 tokens, so
this alone is most of the speed-up over padding everything to max_length.

Precision. Training's evaluation and the default of every function here is
fp32. Bulk evaluation (the CLI's ``evaluate``/``report``, the error-analysis
page) asks for ``precision="auto"``: bf16 autocast on a CPU with bf16 matrix
units (AMX-BF16 or AVX512-BF16, read from /proc/cpuinfo at run time), fp32
everywhere else, including CPUs without them, where bf16 is emulated and slower
(``device.resolve_precision``).
The softmax is always taken in fp32. The main page's single prediction never
comes through here (``inference.FastBertForward``, exact fp32).
"""
from __future__ import annotations

import contextlib
from typing import Callable

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from reviewbert.model.device import resolve_precision
from reviewbert.model.metrics import compute_metrics, confusion


def encode_texts(tokenizer, texts: list[str], max_length: int, *,
                 return_lengths: bool = False):
    """Token ids with [CLS]/[SEP], truncated to max_length, not padded.

    With ``return_lengths``: (ids, lengths) where ``lengths[i]`` is review i's full
    wordpiece count without [CLS]/[SEP], before truncation (what ``min_tokens``, the
    seed's length filter, counts). The ids are then cut by hand, exactly as the
    tokenizer's own truncation cuts a single sequence: the first max_length - 2 pieces.
    """
    if not texts:
        return ([], []) if return_lengths else []
    if not return_lengths:
        enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=False,
                        return_attention_mask=False, return_token_type_ids=False)
        return enc["input_ids"]
    enc = tokenizer(list(texts), truncation=False, padding=False, verbose=False,
                    return_attention_mask=False, return_token_type_ids=False)
    ids, lengths = [], []
    for x in enc["input_ids"]:
        lengths.append(len(x) - 2)
        ids.append(x if len(x) <= max_length else x[:max_length - 1] + x[-1:])
    return ids, lengths


class EncodedDataset(Dataset):
    """Pre-tokenized reviews; item i is (ids, label). ``lengths`` drive batching."""

    def __init__(self, ids: list[list[int]], labels):
        self.ids = ids
        self.labels = [int(y) for y in labels]
        self.lengths = [len(x) for x in ids]

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        return self.ids[i], self.labels[i]


class PadCollator:
    """Pads a batch to its longest member (a class, not a lambda: DataLoader workers pickle it)."""

    def __init__(self, pad_id: int):
        self.pad_id = pad_id

    def __call__(self, batch):
        n, width = len(batch), max(len(ids) for ids, _ in batch)
        input_ids = torch.full((n, width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((n, width), dtype=torch.long)
        for i, (ids, _) in enumerate(batch):
            input_ids[i, :len(ids)] = torch.tensor(ids, dtype=torch.long)
            mask[i, :len(ids)] = 1
        labels = torch.tensor([y for _, y in batch], dtype=torch.long)
        return {"input_ids": input_ids, "attention_mask": mask, "labels": labels}


def eval_loader(dataset: EncodedDataset, batch_size: int, pad_id: int,
                num_workers: int = 0) -> DataLoader:
    """Longest reviews first (a memory error shows up on batch 1, not at the end)."""
    order = sorted(range(len(dataset)), key=lambda i: -dataset.lengths[i])
    sub = EncodedDataset([dataset.ids[i] for i in order], [dataset.labels[i] for i in order])
    return DataLoader(sub, batch_size=batch_size, shuffle=False,
                      collate_fn=PadCollator(pad_id), num_workers=num_workers,
                      generator=torch.Generator())  # leave the global RNG alone (see training/setup.py)


def _autocast(model, precision: str):
    if precision == "fp32":
        return contextlib.nullcontext()
    if precision != "bf16":
        raise ValueError(f"precision must be 'fp32' or 'bf16' here, got {precision!r}")
    # One context around the whole loop: autocast then casts each weight once, not per batch.
    return torch.autocast(device_type=model.device.type, dtype=torch.bfloat16)


@torch.inference_mode()
def predict_probs(model, loader, accelerator=None, *, precision: str = "fp32",
                  progress: Callable[[int], None] | None = None,
                  on_batch: Callable[[dict, object], None] | None = None,
                  tap=None) -> tuple[np.ndarray, np.ndarray]:
    """(labels, probabilities) over a loader; with an Accelerator, gathered from all processes.

    ``gather_for_metrics`` drops the samples Accelerate repeated to even out the
    last batch across processes, so every review is counted exactly once.

    Options for bulk evaluation (defaults change nothing): ``precision`` "bf16"
    runs the forward under bf16 autocast (resolve "auto" first with
    :func:`resolve_precision`); ``progress(n)`` is called after each batch with
    the number of reviews this process just scored; ``on_batch(batch, outputs)``
    sees each local batch (on the model's device, labels removed) with the model's
    outputs, computed with ``output_attentions=True`` (the model must use eager
    attention): the per-rating attention pass reads the [CLS] rows there.

    ``tap`` (``analysis.embeddings.VectorTap``) keeps one vector per review from the
    same forward pass: ``tap.attached(model)`` is open during the loop (a hook on the one
    layer it reads), ``tap(batch, outputs)`` gives [batch, dim], gathered like the
    probabilities and handed to ``tap.collect`` in the order of the returned labels.
    """
    was_training = model.training
    model.eval()
    ys, ps = [], []
    attached = tap.attached(model) if tap is not None else contextlib.nullcontext()
    with _autocast(model, precision), attached:
        for batch in loader:
            if accelerator is None:
                batch = {k: v.to(model.device) for k, v in batch.items()}
            labels = batch.pop("labels")
            extra = tap.forward_kwargs() if tap is not None else {}
            if on_batch is None:
                out = model(**batch, **extra)
            else:
                out = model(**batch, output_attentions=True, **extra)
                on_batch(batch, out)
            probs = torch.softmax(out.logits.float(), dim=-1)  # softmax in fp32 even under bf16/fp16
            vecs = tap(batch, out) if tap is not None else None
            if progress is not None:
                progress(int(labels.shape[0]))
            if accelerator is not None:
                if vecs is None:
                    probs, labels = accelerator.gather_for_metrics((probs, labels))
                else:   # float16 would stop CPU autocast's cat inside the gather: gather fp32
                    probs, labels, vecs = accelerator.gather_for_metrics((probs, labels,
                                                                          vecs.float()))
            if vecs is not None:
                tap.collect(vecs.cpu())
            ys.append(labels.cpu())
            ps.append(probs.cpu())
    model.train(was_training)
    if not ys:
        return np.zeros(0, dtype=np.int64), np.zeros((0, model.config.num_labels))
    return torch.cat(ys).numpy(), torch.cat(ps).numpy()


def evaluate_examples(model, tokenizer, examples, *, max_length: int, batch_size: int = 64,
                      num_labels: int | None = None) -> dict:
    """Metrics and confusion matrix for a list of data.Example on one process (CLI, bench)."""
    return evaluate_chunks(model, tokenizer, [examples], max_length=max_length,
                           batch_size=batch_size, num_labels=num_labels)


def evaluate_chunks(model, tokenizer, chunks, *, max_length: int, batch_size: int = 64,
                    num_labels: int | None = None) -> dict:
    """:func:`evaluate_examples` over an iterable of Example lists (``data.unique_reviews``):
    only one chunk's texts and token ids are held at a time, plus the probabilities."""
    num_labels = num_labels or model.config.num_labels
    ys, ps = [np.zeros(0, dtype=np.int64)], [np.zeros((0, num_labels), dtype=np.float32)]
    for examples in chunks:
        ds = EncodedDataset(encode_texts(tokenizer, [e.text for e in examples], max_length),
                            [e.label for e in examples])
        y, p = predict_probs(model, eval_loader(ds, batch_size, tokenizer.pad_token_id))
        ys.append(y)
        ps.append(p)
    y, p = np.concatenate(ys), np.concatenate(ps)
    out = compute_metrics(y, p, num_labels)
    out["confusion_matrix"] = confusion(y, p, num_labels) if len(y) else []
    return out


def predict_in_order(model, tokenizer, texts: list[str], *, max_length: int,
                     batch_size: int = 64, precision: str = "fp32", accelerator=None,
                     progress: Callable[[int], None] | None = None,
                     on_batch: Callable[[dict, object], None] | None = None,
                     tap=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(probabilities [n, classes], token counts [n], loader order [n]) for ``texts``, rows
    in input order: the bulk path (CLI, error-analysis page, benchmark).

    Same loader and loop as training's evaluation (length-sorted batches, dynamic
    padding). Each review's "label" is its own index, so the gathered rows are put
    back in input order whatever order the batches (or the processes under
    ``accelerate launch``) ran in. ``order[j]`` is the review scored j-th (what
    ``on_batch`` sees batch by batch). ``precision`` is "auto", "bf16" or "fp32".
    With a ``tap``, its vectors are put in input order too (``tap.in_order(idx, n)``).
    """
    n = len(texts)
    ids, lengths = encode_texts(tokenizer, texts, max_length, return_lengths=True)
    ds = EncodedDataset(ids, range(n))
    loader = eval_loader(ds, batch_size, tokenizer.pad_token_id)
    order = np.array(sorted(range(n), key=lambda i: -ds.lengths[i]), dtype=np.int64)
    if accelerator is not None:
        loader = accelerator.prepare(loader)
    device = accelerator.device if accelerator is not None else model.device
    idx, p = predict_probs(model, loader, accelerator,
                           precision=resolve_precision(precision, device),
                           progress=progress, on_batch=on_batch, tap=tap)
    if tap is not None:
        tap.in_order(idx, n)
    probs = np.zeros((n, p.shape[1] if p.ndim == 2 else model.config.num_labels), np.float32)
    probs[idx] = p
    if n and not np.array_equal(np.sort(idx), np.arange(n)):
        raise RuntimeError("evaluation lost or repeated reviews (gathered indices do not "
                           "cover the input once)")
    return probs, np.asarray(lengths, dtype=np.int64), order


@torch.inference_mode()
def predict_texts(model, tokenizer, texts: list[str], max_length: int = 256) -> np.ndarray:
    """Class probabilities [n, num_labels] for raw texts, in input order."""
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=True,
                    return_tensors="pt", return_token_type_ids=False).to(model.device)
    model.eval()
    return torch.softmax(model(**enc).logits.float(), dim=-1).cpu().numpy()
