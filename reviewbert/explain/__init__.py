"""Which words mattered: explanation methods, their cache and their faithfulness.

- ``methods``       seven explanation methods with one result shape (``TokenScores``), and agreement
- ``cache``         one review's slow explanations, computed once and kept beside the checkpoint
- ``faithfulness``  ERASER comprehensiveness and sufficiency over a split, resumable
- ``figures``       Plotly figures of the explanations and of their faithfulness
"""
