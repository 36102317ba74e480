"""The split map in one object, for the HTML report and ``report --json``: the
projector (PCA 2-D by default, coloured by true rating), its plain reading with
numbers, neighbour agreement, the per-rating drivers (IG, attention × value norm,
raw attention) and the worst single-attribute slices."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from reviewbert.analysis import drivers as drivers_mod
from reviewbert.analysis import embeddings, map_figures, map_reading, neighbours, projection, slices

WORST = 3


@dataclass
class MapSummary:
    projection: projection.Projection
    vectors_label: str
    reading: map_reading.MapReading
    neighbours: neighbours.SplitNeighbours
    worst: pd.DataFrame                     # slices.slice_table, worst first
    drivers: drivers_mod.Drivers | None = None
    tops: dict = field(default_factory=dict)   # method -> {class: DataFrame(word, score, reviews)}
    figure: object | None = None            # the projector figure
    pred: np.ndarray | None = None          # the split's predicted classes
    axis: str = ""                          # how the first axis orders the ratings

    def to_json(self, names, top_words: int = 5, worst: int = 10) -> dict:
        r = self.reading
        out = {"vectors": self.vectors_label,
               "projection": {"method": self.projection.method, "dims": self.projection.dims,
                              "seconds": round(self.projection.seconds, 3),
                              "explained_variance": self.projection.explained},
               "neighbours": {"k": self.neighbours.k,
                              "mean_agreement": self.neighbours.mean_agreement,
                              "knn_accuracy": r.knn_accuracy,
                              "knn_agrees_with_model": None if self.pred is None else
                              self.neighbours.knn_agrees_with_model(self.pred)},
               "reading": {"text": r.plain, "axis": self.axis, "silhouette": r.silhouette,
                           "model_accuracy": r.model_accuracy,
                           "errors_in_predicted_region": r.errors_in_predicted_region,
                           "own_neighbour_share": [float(x) for x in np.diag(r.purity)]},
               "worst_slices": self.worst.head(worst).replace({np.nan: None}).to_dict("records")}
        if self.drivers is not None:
            out["drivers"] = {
                "reviews": int(len(self.drivers.rows)),
                "seconds_per_1000_reviews": self.drivers.seconds_per_1000,
                "ig_delta_over_5pc": self.drivers.over_delta,
                "top": {drivers_mod.LABELS[m]: {names[c]: df.head(top_words)["word"].tolist()
                                                for c, df in tops.items()}
                        for m, tops in self.tops.items()}}
        return out


def summarise(preds, model, tokenizer, predictor=None, *, flagged=None, method: str = "pca",
              drivers_sample: int | None = drivers_mod.DEFAULT_SAMPLE, progress=None,
              drivers_progress=None, use_cache: bool = True, min_count: int = 5) -> MapSummary:
    """Everything the report shows about the map. Vectors come from the cache or one pass;
    drivers only with a ``predictor`` and a non-zero ``drivers_sample``."""
    spec = embeddings.DEFAULT
    n_layers = embeddings.n_layers_of(model)
    vecs = embeddings.vectors_for(preds, model, tokenizer, spec, progress=progress,
                                  use_cache=use_cache)
    proj = projection.project(vecs, method, 2, folder=preds.folder if use_cache else None,
                              vectors_name=spec.name(n_layers))
    nb = neighbours.split_neighbours(vecs, preds.y, preds.pred, preds.scheme.num_labels)
    reading = map_reading.read_map(vecs, preds.y, preds.pred, preds.names, nb)
    col = map_figures.colouring("true rating", preds)
    fig = map_figures.projector_figure(proj.coords, col, map_figures.hover_texts(preds),
                                       f"{proj.title} of the {spec.label(n_layers)}")
    out = MapSummary(proj, spec.label(n_layers), reading, nb,
                     slices.slice_table(preds, flagged), figure=fig, pred=preds.pred,
                     axis=map_reading.axis_reading(proj.coords, preds.y, preds.names, False))
    if predictor is not None and drivers_sample != 0:
        d = drivers_mod.compute_drivers(preds, predictor, sample=drivers_sample,
                                        progress=drivers_progress, use_cache=use_cache)
        gid, _ = drivers_mod.groups(d, preds, "predicted")
        out.drivers = d
        out.tops = {m: drivers_mod.top_drivers(d, gid, preds.scheme.num_labels, m,
                                               min_count=min_count)
                    for m in drivers_mod.METHODS}
    return out
