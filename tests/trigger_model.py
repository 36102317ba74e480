"""A tiny BERT whose rating is decided by one word, its weights set by hand (no training).

One layer, hidden size 8, two heads, the real uncased WordPiece tokenizer. Every word
embeds to zero but two: UP ("excellent") and DOWN ("terrible"). Queries and keys are
zero, so [CLS] attends evenly to every token; values, output projection and pooler are
identities and the feed-forward block is zero, so [CLS] ends up holding the LayerNorm of
the mean of the tokens' embeddings. LayerNorm divides by the size of that mean, so the
count and place of the other words do not matter, only whether UP or DOWN is there:

- neither: [CLS] is zero, the classifier's bias decides: NEUTRAL ("3 stars");
- UP: "4 stars" (p ≈ 0.97); DOWN: "2 stars".

So the deletion flip of a review with UP is exactly UP, occlusion ranks it first, and
HotFlip's best swap towards 4 stars in a neutral review is UP.
"""
from __future__ import annotations

from pathlib import Path

UP, DOWN = "excellent", "terrible"
UP_CLASS, NEUTRAL, DOWN_CLASS = 3, 2, 1


def make_trigger_model(out: Path) -> Path:
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from reviewbert.model.checkpoint import resolve_base_model
    from reviewbert.model.labels import get_scheme

    scheme = get_scheme(5)
    tok = AutoTokenizer.from_pretrained(resolve_base_model(None))
    cfg = BertConfig(vocab_size=len(tok), hidden_size=8, num_hidden_layers=1,
                     num_attention_heads=2, intermediate_size=8, max_position_embeddings=512,
                     num_labels=5, id2label=scheme.id2label, label2id=scheme.label2id,
                     layer_norm_eps=1e-6, hidden_act="gelu")
    model = BertForSequenceClassification(cfg)
    eye = torch.eye(8)
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
        word = model.bert.embeddings.word_embeddings.weight
        word[tok.convert_tokens_to_ids(UP)] = torch.tensor([1.0, -1, 0, 0, 0, 0, 0, 0])
        word[tok.convert_tokens_to_ids(DOWN)] = torch.tensor([0.0, 0, 1, -1, 0, 0, 0, 0])
        layer = model.bert.encoder.layer[0]
        for ln in (model.bert.embeddings.LayerNorm, layer.attention.output.LayerNorm,
                   layer.output.LayerNorm):
            ln.weight.fill_(1.0)
        layer.attention.self.value.weight.copy_(eye)
        layer.attention.output.dense.weight.copy_(eye)
        model.bert.pooler.dense.weight.copy_(eye)
        head = model.classifier
        head.weight[UP_CLASS, :2] = torch.tensor([3.0, -3.0])
        head.weight[DOWN_CLASS, 2:4] = torch.tensor([3.0, -3.0])
        head.bias[NEUTRAL] = 2.0
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out, safe_serialization=True)
    tok.save_pretrained(out)
    return out
