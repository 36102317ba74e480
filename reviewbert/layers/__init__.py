"""The rating after every layer: linear probes on [CLS] at each depth of the model.

- ``probes``    reading every layer's [CLS] in one pass, fitting and scoring the probes,
                one review's probabilities after each layer
- ``analysis``  the probes of a checkpoint and of its base model, scored and cached
- ``cache``     that result kept beside the checkpoint
- ``figures``   Plotly figures of the Layers views
"""
