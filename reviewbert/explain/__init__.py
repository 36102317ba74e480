"""Which words mattered: explanation methods, their cache and their faithfulness.

- ``methods``       seven explanation methods with one result shape (``TokenScores``), and agreement
- ``contrast``      why this star and not the next: IG of one rating's logit minus another's
- ``cache``         one review's slow explanations, computed once and kept beside the checkpoint
- ``faithfulness``  ERASER comprehensiveness and sufficiency over a split, resumable
- ``figures``       Plotly figures of the explanations and of their faithfulness
"""
