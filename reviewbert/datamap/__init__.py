"""The data map of a training run (dataset cartography, Swayamdipta et al. 2020).

Modules, one concept each:

- ``record``    reads a run's ``datamap.safetensors`` (written during training by
                ``reviewbert/training/datamap.py``); None, with the reason, for a run
                trained before the data map was recorded
- ``stats``     confidence, variability and correctness per review, and the regions
                (easy-to-learn, ambiguous, hard-to-learn) with their thresholds
- ``figures``   the paper's scatter in Plotly: variability x, confidence y, colour =
                correctness, the regions outlined
- ``slices``    the hard-to-learn and ambiguous regions saved as Error analysis slices
                beside the predictions of the run's training split

The Train page draws it (``reviewbert/ui/train_datamap.py``).
"""
from reviewbert.datamap.record import NOT_RECORDED, DataMap, DataMapError, read_datamap

__all__ = ["NOT_RECORDED", "DataMap", "DataMapError", "read_datamap"]
