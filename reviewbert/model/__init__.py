"""The model: a checkpoint in, predictions and attention out.

- ``checkpoint``       the base model; loading, saving, exporting and listing checkpoints
- ``plain_bert``       a BERT classifier's weights read straight from safetensors (no transformers)
- ``plain_tokenizer``  its tokenizer read with ``tokenizers`` alone
- ``inference``        one forward pass: a review in, one plain ``Prediction`` out (``Predictor``)
- ``batch_predict``    batched prediction over many reviews (evaluation, the CLI, whole-split pages)
- ``attention``        attention arithmetic for the views: [CLS] rows, head averages, word merging
- ``labels``           label schemes: 5 labels (1-5 stars) or 3 (negative/neutral/positive)
- ``metrics``          the seed report's four numbers as pure functions of (y_true, probs)
- ``device``           where and in what precision the model runs; CPU threads per process
- ``pruning``          heads physically removed from a BERT classifier
- ``buffers``          reused memory for a prediction's [L, H, T, T] attention
- ``row_memo``         the logits of token-id rows already read, so stopped work resumes
"""
