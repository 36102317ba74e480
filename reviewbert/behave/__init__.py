"""Behavioural tests for star-rating models, in CheckList's method (MFT, INV and DIR tests).

A suite is readable YAML (``reviewbert/behave/suites/default.yaml``): tests grouped by
capability, each with templates and word lists, a perturbation of real reviews, or
explicit cases. The modules:

- ``suite.py``: the suite file's parser, validator, dumper and fingerprint;
- ``perturb.py``: the named perturbations (typos, punctuation, case, contractions, URLs,
  order numbers, added sentences, swaps, numbers), each deterministic for a seed;
- ``cases.py``: a suite's tests turned into cases (templates expanded, reviews perturbed);
- ``scoring.py``: MFT/INV/DIR pass and fail, fail rates with Wilson intervals;
- ``runner.py``: a suite run on a checkpoint, every distinct text scored once, the result
  cached beside the checkpoint;
- ``compare.py``: two checkpoints' results, test by test, with Newcombe intervals;
- ``cases_csv.py``: MFT cases imported from a CSV file;
- ``figures.py``: the capability × test type matrix and the comparison's bars.

Nothing heavy is imported here: the modules are imported by name where they are used.
"""
