"""ReviewBERT: fine-tune BERT to predict review stars, and look at its attention."""

__version__ = "0.1.0"
