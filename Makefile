# The two commands of the README: `make run` and `make test`. Each sets up what it needs.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
REQ_HASH := $(shell cat requirements.txt requirements-test.txt pyproject.toml | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(REQ_HASH)

.PHONY: run test lint setup browser bench demo-checkpoint clean-venv

setup: $(STAMP)

$(STAMP): requirements.txt requirements-test.txt pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	@# torch first: 2.13.0 is a local CPU build on our machines; a bare `torch` would pull CUDA wheels.
	@$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -r requirements.txt -r requirements-test.txt
	@# the package itself, editable: the `reviewbert` command (= python -m reviewbert) in .venv/bin
	$(PY) -m pip install -q --no-deps -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

run: setup
	$(VENV)/bin/python -m reviewbert.ui.runtime.launcher $(ARGS)

browser:
	@bash scripts/ensure-chromium.sh

# Two workers (pytest-xdist), each taking whole files: one worker alone left a core mostly
# idle (much of a browser or subprocess test is waiting), and module fixtures (a Streamlit
# server, a trained run) still start once. TEST_WORKERS=0 runs in one process.
# `make test` runs every test outside the suites below; the suites are defined, with their
# markers, in one place: tests/conftest.py (SUITES). docs/testing.md says what each holds.
TEST_WORKERS ?= 2
test: setup browser lint docs-check
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# ruff, with the rules in pyproject.toml ([tool.ruff]); `make test` runs it first
lint: setup
	$(VENV)/bin/ruff check .

# The documentation site (mkdocs.yml, docs/): `make docs` builds it into site/, which opens
# from disk with no network. `make test` runs docs-check first: the same build with
# --strict into a temporary folder, so a broken link or a missing page fails it.
.PHONY: docs docs-check
docs: setup
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

docs-check: setup
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	  NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet --site-dir "$$tmp"

# The suites kept out of `make test`'s 15 minutes, each run by its own target; CI (.ci/run)
# runs heads, e2e, umap and faults after make test.
.PHONY: heads e2e umap faults fuzz hostile load distributed postgres
# The Heads analysis of the demo on 300 test reviews, beside the Heads page in Chromium.
heads: setup browser
	$(PY) -m pytest -m heads -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The end-to-end journeys: the Train, Error analysis, Which words and Map pages driven in
# Chromium, a server killed while a run trains, launch / stop / resume / queue on real
# data, a search launched from the Train page, the real model fine-tuned and used through
# the CLI, and the demo in bf16 (slow on a CPU without bf16 units).
e2e: setup browser
	$(PY) -m pytest -m e2e -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# UMAP on a toy set and of 10,000 reviews of a real data file: UMAP's first call compiles
# its numba code, so run it alone.
umap: setup
	$(PY) -m pytest -m umap -n 0 $(PYTEST_ARGS)

# The fault loops: SIGKILL a training run at four points, one of each kind, then at ten
# random points, and resume each time.
faults: setup
	$(PY) -m pytest -m faults $(PYTEST_ARGS)

# Thousands of generated bad inputs per property (`make test` runs a few dozen of each).
# More: make fuzz REVIEWBERT_FUZZ_EXAMPLES=10000
fuzz: setup
	REVIEWBERT_FUZZ_EXAMPLES=$(or $(REVIEWBERT_FUZZ_EXAMPLES),1500) \
	  $(PY) -m pytest -m fuzz --hypothesis-show-statistics $(PYTEST_ARGS)

# The whole hostile-text corpus (tests/hostile_texts.py) through the Predict, Error analysis
# and Inside BERT pages, the What if? editor, Fool the model (entries and names on a second
# browser's board), the test editor, a CSV import and the Cohorts page (reviews, tags, notes,
# the lexicon) in Chromium (`make test` runs a few of its texts on each).
hostile: setup browser
	$(PY) -m pytest tests/browser/test_browser_hostile.py tests/browser/test_browser_hostile_cohorts.py \
	  -m "hostile or not hostile" $(PYTEST_ARGS)

# Many concurrent Streamlit sessions against one server while a run trains. The full
# measurement: .venv/bin/python bench/load.py
load: setup
	$(PY) -m pytest -m load $(PYTEST_ARGS)

# Search workers and the shared store (Fool the model's entries, a killed writer, a killed
# app server, 20 sessions) on a real PostgreSQL server: Debian's postgresql is installed if missing
# (root or sudo, as for chromium), each test starts a throwaway server (initdb in a
# temporary folder, 127.0.0.1 only) and removes it.
postgres:
	@bash scripts/ensure-postgresql.sh

distributed: setup postgres
	$(PY) -m pytest -m distributed -n 0 $(PYTEST_ARGS)

bench: setup
	$(PY) bench/ingest.py
	$(PY) bench/train_throughput.py
	$(PY) bench/predict_latency.py

demo-checkpoint: setup
	bash scripts/train-demo.sh

clean-venv:
	rm -rf $(VENV)
