"""The Heads page's analysis: which heads matter, what each does, what fine-tuning changed.

- ``importance``  Michel et al.'s importance, the measured masking drop, the pruning curve
- ``roles``       what each head does (Clark et al.'s numbers, a Kovaleva-style label)
- ``analysis``    the whole analysis of a checkpoint on a set of reviews, in stages
- ``cache``       that analysis kept beside the checkpoint
- ``figures``     Plotly figures of the Heads page
- ``qkmap``       every head's queries and keys in one pass, normalised as AttentionViz does
- ``qk_figures``  the query–key map of one head and the matrix of every head's thumbnail
"""
