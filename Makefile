# The two commands of the README: `make run` and `make test`. Each sets up what it needs.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
REQ_HASH := $(shell cat requirements.txt requirements-test.txt pyproject.toml | sha1sum | cut -c1-12)
STAMP := $(VENV)/.installed-$(REQ_HASH)

.PHONY: run test lint fuzz setup browser bench demo-checkpoint clean-venv

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

# Two workers (pytest-xdist), each taking whole files: one worker alone used ~0.9 of the
# two cores (much of a browser or subprocess test is waiting), and module fixtures (a
# Streamlit server, a trained run) still start once. TEST_WORKERS=0 runs in one process.
TEST_WORKERS ?= 2
test: setup browser lint
	$(PY) -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The Heads suite (tests marked `heads`): the analysis of the demo on 300 test reviews
# (tests/integration/test_heads_demo.py) beside the Heads page in Chromium
# (tests/browser/test_browser_heads.py), ~3 min on 2 cores. Its own command because it
# took 3 of make test's 15 minutes; CI (.ci/run) runs it after make test.
.PHONY: heads
heads: setup browser
	$(PY) -m pytest -m heads -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The end-to-end journeys (tests marked `e2e`): the Train, Error analysis, Which words and
# Map pages driven through in Chromium, a server killed while a run trains, launch / stop /
# resume / queue on real data, a search launched from the Train page, the real model
# fine-tuned and used through the CLI, and the demo in bf16 on 96 reviews (~50 s: bf16
# without bf16 units; moved out of make test when it reached 14 min 12 s, 2026-11-28).
# Each took 60-80 s on a 2-core AVX2 CPU, and with them make test took 19 minutes there
# (11 on an AVX-512 one); CI (.ci/run) runs them after make test. ~5 min on 2 cores.
.PHONY: e2e
e2e: setup browser
	$(PY) -m pytest -m e2e -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# ruff, with the rules in pyproject.toml ([tool.ruff]); `make test` runs it first
lint: setup
	$(VENV)/bin/ruff check .

# Thousands of generated bad inputs per property (tests marked `fuzz`; `make test` runs a
# few dozen of each). More: make fuzz REVIEWBERT_FUZZ_EXAMPLES=10000
fuzz: setup
	REVIEWBERT_FUZZ_EXAMPLES=$(or $(REVIEWBERT_FUZZ_EXAMPLES),1500) \
	  $(PY) -m pytest -m fuzz --hypothesis-show-statistics $(PYTEST_ARGS)

# Many concurrent Streamlit sessions against one server while a run trains (tests marked
# `load`; `make test` skips them). The full measurement: .venv/bin/python bench/load.py
.PHONY: load
load: setup
	$(PY) -m pytest -m load $(PYTEST_ARGS)

# The whole hostile-text corpus (tests/hostile_texts.py) through the Predict, Error analysis
# and Inside BERT pages and the What if? editor in Chromium (`make test` runs a few of its
# texts on each).
.PHONY: hostile
hostile: setup browser
	$(PY) -m pytest tests/browser/test_browser_hostile.py -m "hostile or not hostile" $(PYTEST_ARGS)

# The fault loops (tests marked `faults`: SIGKILL a training run at four points, one of each
# kind, then at ten random points, and resume each time; ~70 s and ~3 min on 2 cores, so
# make test leaves them to CI's step after it).
.PHONY: faults
faults: setup
	$(PY) -m pytest -m faults $(PYTEST_ARGS)

# Search workers on a real PostgreSQL server (tests marked `distributed`; `make test` skips
# them): Debian's postgresql is installed if missing (root or sudo, as for chromium), each
# test starts a throwaway server (initdb in a temporary folder, 127.0.0.1 only) and removes it.
.PHONY: postgres distributed
postgres:
	@bash scripts/ensure-postgresql.sh

distributed: setup postgres
	$(PY) -m pytest -m distributed -n 0 $(PYTEST_ARGS)

# UMAP on a toy set and of 10,000 reviews of a real data file, embedded by the demo
# checkpoint (tests marked `umap`): UMAP's first call compiles its numba code, a minute on
# 2 cores, so make test leaves it to CI's step after it. Run it alone.
.PHONY: umap
umap: setup
	$(PY) -m pytest -m umap -n 0 $(PYTEST_ARGS)

bench: setup
	$(PY) bench/ingest.py
	$(PY) bench/train_throughput.py
	$(PY) bench/predict_latency.py

demo-checkpoint: setup
	bash scripts/train-demo.sh

clean-venv:
	rm -rf $(VENV)
