"""What is kept beside a checkpoint: where, and in which form.

- ``run_records``  long runs' results (faithfulness, brittleness) keyed by what decides
                   their numbers, resumable from a partial file
"""
