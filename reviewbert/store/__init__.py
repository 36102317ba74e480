"""What is kept beside a checkpoint: where, and in which form.

- ``location``     where: the one policy of every cache beside a checkpoint (beside it, else
                   a per-user fallback), the first writable folder, finding an entry in any
- ``run_records``  long runs' results (faithfulness, brittleness) keyed by what decides
                   their numbers, resumable from a partial file: the base ``RunRecord``
"""
