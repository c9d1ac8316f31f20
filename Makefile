# Quick start:  make demo       (set up + index the shared corpora + compare policies)
#               make test       (the whole test suite)
#               make test-fast  (everything not marked slow: no real model, no big corpora)
VENV ?= .venv
PY := $(VENV)/bin/python
SUTURE := $(VENV)/bin/suture
SUTURE_DATA ?= ../shared/data
DEMO_INDEX ?= demo-index
export SUTURE_DATA

.PHONY: setup demo test test-fast lint check-data bench clean

setup: $(VENV)/.installed

# torch is pinned first: 2.13.0 is the CPU build on this machine's disk; any other
# spec would pull a CUDA build of several GB.
$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[dev]'
	touch $@

# The demo needs the shared corpora; say where they were looked for before any work.
check-data:
	@test -d "$(SUTURE_DATA)/corpora" || { \
	  echo "error: no shared corpora at $(SUTURE_DATA)/corpora (SUTURE_DATA=$(SUTURE_DATA))." >&2; \
	  echo "Put the shared data in ../shared/data next to this repository, or run" >&2; \
	  echo "  make demo SUTURE_DATA=/path/to/shared/data" >&2; exit 1; }

demo: check-data setup
	$(SUTURE) index $(SUTURE_DATA)/corpora --index $(DEMO_INDEX)
	$(SUTURE) info --index $(DEMO_INDEX)
	@for q in \
	  "How is a TCP connection established (three-way handshake)?" \
	  "When must a personal data breach be notified to the supervisory authority?" \
	  "How much revenue did Microsoft Cloud generate in fiscal year 2023?" \
	  "Under what conditions can the merger agreement be terminated?"; do \
	  $(SUTURE) compare "$$q" --index $(DEMO_INDEX) --policies topk,window,window2,parent,scar,scar-sentences || exit 1; \
	done
	$(SUTURE) query "How is a TCP connection established (three-way handshake)?" \
	  --index $(DEMO_INDEX) --k 3

test: setup
	$(PY) -m pytest

test-fast: setup
	$(PY) -m pytest -m "not slow"

lint: setup
	$(VENV)/bin/ruff check src tests benchmarks scripts
	$(VENV)/bin/mypy src

clean:
	rm -rf $(VENV) $(DEMO_INDEX)
