"""Inside BERT: one sentence through the real model, step by step.

- ``trace``    the tensors of every step (embeddings, Q/K/V, heads, [CLS])
- ``figures``  the page's Plotly figures
"""
