"""Failing cohorts: where the errors of a split cluster, and the loop that fixes the data.

- ``properties``: one row of documented properties per review (length, negations, contrast,
  VADER sentiment, readability, punctuation and capitals, aspects, other brands, source,
  cleanlab's flag, near-duplicates, true and predicted stars), cached beside the predictions.
- ``conditions``: a cohort's definition as conditions on those properties, written and read
  as a pandas ``query`` string of a small checked grammar (never ``eval``-ed as given).
- ``finder``: the error tree (scikit-learn) and SliceLine's top slices, each with n, error
  rate, a Wilson interval, lift and, for slices, a Benjamini–Hochberg adjusted p-value.
- ``figures``: the tree (an icicle), the slices' error rates and the heat map, in Plotly.
- ``pipeline``: properties, tree and slices as one result for the page, the command line
  and the report; ``compare``: two checkpoints on the same cohorts, before and after a fix.
- ``hygiene``: exact and near-duplicate reviews, train/test leakage, conflicting labels.
- ``triage``: the tag taxonomy, the review queue, relabels (in the shared store).
- ``fix``: the corrected data file and the tags/notes export.
"""
