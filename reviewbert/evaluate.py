"""Batched inference for training-time evaluation, the CLI and the benchmark.

Reviews are tokenized once, up front, to lists of ids (no padding). A batch is
padded only to its own longest review ("dynamic padding"), and evaluation walks
the reviews sorted by length, so a batch of short reviews costs what short
reviews cost. On this data most reviews are far shorter than 256 tokens, so
this alone is most of the speed-up over padding everything to max_length.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from .metrics import compute_metrics, confusion


def encode_texts(tokenizer, texts: list[str], max_length: int) -> list[list[int]]:
    """Token ids with [CLS]/[SEP], truncated to max_length, not padded."""
    if not texts:
        return []
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=False,
                    return_attention_mask=False, return_token_type_ids=False)
    return enc["input_ids"]


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
                      generator=torch.Generator())  # leave the global RNG alone (see train.py)


@torch.inference_mode()
def predict_probs(model, loader, accelerator=None) -> tuple[np.ndarray, np.ndarray]:
    """(labels, probabilities) over a loader; with an Accelerator, gathered from all processes.

    ``gather_for_metrics`` drops the samples Accelerate repeated to even out the
    last batch across processes, so every review is counted exactly once.
    """
    was_training = model.training
    model.eval()
    ys, ps = [], []
    for batch in loader:
        if accelerator is None:
            batch = {k: v.to(model.device) for k, v in batch.items()}
        labels = batch.pop("labels")
        logits = model(**batch).logits
        probs = torch.softmax(logits.float(), dim=-1)  # softmax in fp32 even under bf16/fp16
        if accelerator is not None:
            probs, labels = accelerator.gather_for_metrics((probs, labels))
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


@torch.inference_mode()
def predict_texts(model, tokenizer, texts: list[str], max_length: int = 256) -> np.ndarray:
    """Class probabilities [n, num_labels] for raw texts, in input order."""
    enc = tokenizer(list(texts), truncation=True, max_length=max_length, padding=True,
                    return_tensors="pt", return_token_type_ids=False).to(model.device)
    model.eval()
    return torch.softmax(model(**enc).logits.float(), dim=-1).cpu().numpy()
