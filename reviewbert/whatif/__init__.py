"""What if? Edit a review and compare; counterfactuals; brittleness over a split.

- ``counterfactuals``  edits, comparisons, and counterfactuals the model itself confirms
- ``brittleness``      how many words must go before the predicted rating changes, over a split
- ``figures``          Plotly figures of both
"""
