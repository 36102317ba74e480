"""Activation patching between two reviews: which (layer, word) and which head carry the
difference between a clean review and a corrupted one.

- ``grid``     the pair's alignment, the batched word grid and head grid, the reading
- ``cache``    one pair's grids kept beside the checkpoint
- ``figures``  the layer × word and layer × head heat maps
"""
