"""Error analysis over a whole split: where the model goes wrong, and where the rating is.

Modules, one concept each (all plain functions, testable without Streamlit):

- ``predictions``   :func:`predict_split` (batched evaluation through
                    ``reviewbert.model.batch_predict``, cached) -> :class:`SplitPredictions`;
                    :func:`lookup` (cache only)
- ``cache``         the on-disk prediction cache: every file and field, and its keys
- ``intervals``     95 % bootstrap intervals of the four metrics (scipy.stats.bootstrap)
- ``breakdown``     confusion matrix, per-class P/R/F1, one-vs-rest ROC, accuracy by length,
                    what the seed's >= 100-token filter changes (scikit-learn)
- ``calibration``   reliability bins and the expected calibration error
- ``compare``       two checkpoints on the same reviews, McNemar's test (scipy)
- ``label_issues``  reviews whose rating is probably wrong (cleanlab)
- ``word_attention`` per-rating [CLS] attention by word, one batched pass, cached
- ``figures``       Plotly figures for all of the above
- ``embeddings``    each review's sentence vector ([CLS] or mean, any layer) from the
                    evaluation's own pass, float16, in the same cache
- ``projection``    PCA (scikit-learn) and UMAP (umap-learn) of the vectors, 2-D/3-D, cached
- ``neighbours``    cosine nearest neighbours (one matrix product in torch), agreement, k-NN accuracy
- ``map_reading``   what the map shows, in words, backed by neighbour purity and silhouette
- ``drivers``       per-rating words by batched Integrated Gradients, attention x value norm
                    and raw attention, cached per review
- ``slices``        slices against the rest with bootstrap intervals, saved by name
- ``map_summary``   all of the map for the report and ``report --json``
- ``map_figures``   the projector (WebGL), drivers and slices figures

The page is ``pages/error_analysis.py`` (components in ``reviewbert/ui/error_analysis.py``);
the one-file HTML report is ``reviewbert/analysis/html_report.py``.
"""
from reviewbert.analysis.predictions import SplitPredictions, export_frame, lookup, predict_split, save_export

__all__ = ["SplitPredictions", "predict_split", "lookup", "export_frame", "save_export"]
